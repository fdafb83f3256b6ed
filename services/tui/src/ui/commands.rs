//! Slash commands: the table the palette completes from, and parsing of a submitted line.
//! A `/name args` that is not a built-in is a skill invocation and goes to the backend as
//! the prompt.

/// One built-in command as listed in the palette and `/help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub name: &'static str,
    /// Argument synopsis (empty: takes none).
    pub args: &'static str,
    pub help: &'static str,
}

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "help",
        args: "",
        help: "keys and commands",
    },
    Spec {
        name: "sessions",
        args: "",
        help: "pick a session to resume",
    },
    Spec {
        name: "new",
        args: "",
        help: "start a new session",
    },
    Spec {
        name: "resume",
        args: "ID",
        help: "resume the session ID",
    },
    Spec {
        name: "model",
        args: "[NAME]",
        help: "show or set the model for the next prompts",
    },
    Spec {
        name: "compact",
        args: "",
        help: "compact the conversation context",
    },
    Spec {
        name: "permissions",
        args: "[ask|accept-edits|bypass]",
        help: "show or set the permission mode for the next prompts",
    },
    Spec {
        name: "skills",
        args: "",
        help: "list the skills (/NAME ARGS runs one)",
    },
    Spec {
        name: "mcp",
        args: "[trust NAME]",
        help: "list MCP servers and tools; trust a project server",
    },
    Spec {
        name: "Team",
        args: "[NAME] TASK",
        help: "run an agent team on a task",
    },
    Spec {
        name: "TeamOut",
        args: "",
        help: "leave the agent team",
    },
    Spec {
        name: "NewTeam",
        args: "NAME [TITLE]",
        help: "create a team definition",
    },
    Spec {
        name: "exit",
        args: "",
        help: "quit lumina",
    },
];

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    Help,
    Sessions,
    New,
    Resume(Option<String>),
    Model(Option<String>),
    Compact,
    Permissions(Option<String>),
    Skills,
    /// `/mcp` lists servers; `/mcp trust NAME` trusts a project server.
    Mcp(Option<String>),
    /// `/Team` opens the team picker; `/Team NAME [TASK]` enters one (and runs TASK).
    Team(Option<String>),
    /// `/TeamOut` leaves the team.
    TeamOut,
    /// `/NewTeam NAME [DISPLAY NAME]` creates a user team.
    NewTeam(Option<String>),
    Exit,
    /// Anything else: sent to the backend as the prompt (a skill invocation).
    Prompt(String),
}

/// Parses a submitted line starting with `/`; `None` for ordinary prompts.
pub fn parse(text: &str) -> Option<Slash> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    };
    let arg = (!args.is_empty()).then(|| args.to_string());
    let slash = match name {
        "help" | "?" => Slash::Help,
        "sessions" => Slash::Sessions,
        "new" | "clear" => Slash::New,
        "resume" => Slash::Resume(arg),
        "model" => Slash::Model(arg),
        "compact" => Slash::Compact,
        "permissions" => Slash::Permissions(arg),
        "skills" => Slash::Skills,
        "mcp" => Slash::Mcp(arg),
        "Team" | "team" => Slash::Team(arg),
        "TeamOut" | "teamout" => Slash::TeamOut,
        "NewTeam" | "newteam" => Slash::NewTeam(arg),
        "exit" | "quit" => Slash::Exit,
        _ => Slash::Prompt(text.trim().to_string()),
    };
    Some(slash)
}

/// Commands whose name starts with `prefix` (case-insensitive), for the palette.
pub fn complete(prefix: &str) -> Vec<&'static Spec> {
    let prefix = prefix.to_ascii_lowercase();
    COMMANDS
        .iter()
        .filter(|spec| spec.name.to_ascii_lowercase().starts_with(&prefix))
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn parses_builtins_and_passes_skills_through() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/help"), Some(Slash::Help));
        assert_eq!(
            parse(" /resume  abc "),
            Some(Slash::Resume(Some("abc".into())))
        );
        assert_eq!(parse("/model"), Some(Slash::Model(None)));
        assert_eq!(
            parse("/permissions bypass"),
            Some(Slash::Permissions(Some("bypass".into())))
        );
        assert_eq!(
            parse("/Team crew build it"),
            Some(Slash::Team(Some("crew build it".into())))
        );
        assert_eq!(parse("/TeamOut"), Some(Slash::TeamOut));
        assert_eq!(
            parse("/review src/lib.rs"),
            Some(Slash::Prompt("/review src/lib.rs".into()))
        );
    }

    #[test]
    fn completes_by_prefix() {
        let names: Vec<&str> = complete("t").iter().map(|s| s.name).collect();
        assert_eq!(names, vec!["Team", "TeamOut"]);
        assert_eq!(complete("").len(), COMMANDS.len());
        assert!(complete("zzz").is_empty());
    }
}
