//! Trust questions: before repository content may run commands — a project's hooks
//! (`.Lumina/CONFIG/defaults.json`) or its MCP servers (`.mcp.json`, `crate::mcp`) — the user
//! is asked once through the permission dialog, as a `permission.requested` for a
//! pseudo-tool (`hooks_trust`, `mcp_trust`). Allowing records the trust under the AppRoot;
//! denying is remembered for the session; headless runs get a warning instead.

use lumina_protocol::{Decision, Event};
use lumina_tools::permission::args_hash;
use serde_json::{json, Value};

use crate::audit::{self, Subject};
use crate::run::RunContext;
use crate::Result;

/// The pseudo-tool of the project-hooks question.
pub const HOOKS_TRUST_TOOL: &str = "hooks_trust";

/// One question.
pub(crate) struct Question {
    /// The pseudo-tool.
    pub tool: &'static str,
    /// Names the question in the session's declined set and in `call_id`.
    pub key: String,
    pub arguments: Value,
    pub preview: String,
    /// The warning a headless run gets: code and message.
    pub headless: (&'static str, String),
}

/// Asks (or warns, headless); `true` when the user allowed. A question the user declined
/// earlier in the session is not asked again (`false`).
pub(crate) async fn ask(ctx: &RunContext, question: Question) -> Result<bool> {
    if ctx.session.lock().trust_declined.contains(&question.key) {
        return Ok(false);
    }
    if ctx.headless {
        let (code, message) = question.headless;
        ctx.warn(code, message).await?;
        return Ok(false);
    }
    let request_id = uuid::Uuid::new_v4().to_string();
    let answer = ctx.session.register_permission(&request_id);
    let subject = Subject {
        tool: question.tool.into(),
        args_hash: args_hash(question.tool, &question.arguments),
        preview: Some(question.preview.clone()),
    };
    ctx.append(vec![Event::PermissionRequested {
        run_id: ctx.run_id.clone(),
        request_id: request_id.clone(),
        call_id: format!("trust-{}", question.key),
        tool: question.tool.into(),
        args_hash: subject.args_hash.clone(),
        arguments: question.arguments,
        preview: Some(question.preview),
    }])
    .await?;
    let answer = tokio::select! {
        a = answer => a.ok(),
        _ = ctx.cancel.cancelled() => None,
    };
    ctx.session.forget_permission(&request_id);
    let (decision, by, reason, sub) = match answer {
        None => (
            Decision::Deny,
            "interrupt",
            Some("the run was interrupted".to_string()),
            None,
        ),
        Some((decision, reason, sub)) => (decision, "user", reason, sub),
    };
    if decision == Decision::Deny {
        ctx.session.lock().trust_declined.insert(question.key);
    }
    let resolved = Event::PermissionResolved {
        run_id: ctx.run_id.clone(),
        request_id,
        decision,
        by: by.into(),
        reason,
    };
    let audit = audit::record(0, &resolved, &subject, sub);
    ctx.append_audited(vec![resolved], audit.into_iter().collect())
        .await?;
    Ok(decision != Decision::Deny)
}

/// Before a top-level run: the project's hooks that are not trusted yet. Trusted hooks
/// apply from the run's next settings reload (its first step) on.
pub(crate) async fn project_hooks(ctx: &RunContext) -> Result<()> {
    let Some(untrusted) = ctx.settings.settings.untrusted_project_hooks.clone() else {
        return Ok(());
    };
    let file = untrusted.file.display().to_string();
    let question = Question {
        tool: HOOKS_TRUST_TOOL,
        key: format!(
            "hooks-{}",
            &untrusted.fingerprint[..16.min(untrusted.fingerprint.len())]
        ),
        arguments: json!({ "file": file, "commands": untrusted.commands }),
        preview: format!(
            "Trust the project's hooks in {file}? They run these commands:\n{}",
            untrusted.commands.join("\n")
        ),
        headless: (
            "hooks_untrusted",
            format!(
                "the project's hooks in {file} are not trusted, so they do not run; run lumina \
                 in this project to review and trust them"
            ),
        ),
    };
    if ask(ctx, question).await? {
        let app_root = &ctx.session.app_root();
        let root = ctx.session.project_root();
        if let Err(err) = lumina_config::trust_project_hooks(app_root, root, &untrusted.fingerprint)
        {
            let message = format!("could not record the trust: {err}");
            ctx.warn("hooks_trust_failed", message).await?;
        }
    }
    Ok(())
}
