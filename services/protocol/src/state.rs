//! Typed states and codes that travel as plain strings: a run's status, a session's status,
//! the code of `run.failed`, and a model endpoint's `api_type`. Each serialises as exactly
//! the wire name docs/protocol.md lists.
//!
//! Journals outlive the code that wrote them, so a name this build does not know (from an
//! older or newer version) decodes as `Other` with the name kept as written, and encodes
//! back unchanged: a stored event or session summary never fails to load because of one.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares an enum of wire names with an `Other(String)` catch-all, its `as_str`,
/// `Display`, conversions from strings, comparisons with `&str`, and serde as a string.
macro_rules! wire_names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A name this build does not know (written by another version), kept as
            /// written. Build values with `From<&str>`, which never yields `Other` for a
            /// known name.
            Other(String),
        }

        impl $name {
            /// Every known variant, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The wire name.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )+
                    $name::Other(name) => name,
                }
            }
        }

        impl fmt::Display for $name {
            /// The wire name; width and alignment apply (`{:<10}`), as for a `str`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                match name {
                    $( $wire => $name::$variant, )+
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl From<String> for $name {
            fn from(name: String) -> Self {
                match name.as_str() {
                    $( $wire => $name::$variant, )+
                    _ => $name::Other(name),
                }
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map($name::from)
            }
        }
    };
}

wire_names! {
    /// Where a run is (`RunSummary.status`).
    pub enum RunStatus {
        /// A follow-up waiting for the runs before it (`run.queued`).
        Queued = "queued",
        Running = "running",
        Completed = "completed",
        Failed = "failed",
        Interrupted = "interrupted",
    }
}

wire_names! {
    /// Where a session is (`SessionInfo.status`). A session nothing is known about yet
    /// (no summary stored) is `idle`.
    #[derive(Default)]
    pub enum SessionStatus {
        /// No run open or queued.
        #[default]
        Idle = "idle",
        /// A run is open or follow-ups are queued.
        Running = "running",
        Archived = "archived",
    }
}

wire_names! {
    /// Why a run failed: the `code` of `run.failed`.
    pub enum RunFailureCode {
        /// The model API refused the key.
        ModelAuth = "model_auth",
        ModelBadRequest = "model_bad_request",
        ModelRateLimited = "model_rate_limited",
        ModelServerError = "model_server_error",
        ModelTimeout = "model_timeout",
        ModelNetwork = "model_network",
        /// The model's stream broke the wire format.
        ModelProtocol = "model_protocol",
        /// No usable model client could be built from the settings.
        ModelNotConfigured = "model_not_configured",
        /// The settings could not be loaded (checked again before every step).
        Settings = "settings",
        /// The run reached the step limit.
        StepLimit = "step_limit",
        RuntimeError = "runtime_error",
        /// A `user_prompt_submit` hook exited with code 2.
        BlockedByHook = "blocked_by_hook",
        /// A goal's budget ran out.
        GoalBudgetExhausted = "goal_budget_exhausted",
        /// A goal failed (an error, or no progress).
        GoalFailed = "goal_failed",
    }
}

wire_names! {
    /// A model endpoint's wire format: the `api_type` setting (default `auto`) and
    /// `model.requested`.
    #[derive(Default)]
    pub enum ApiType {
        Anthropic = "anthropic",
        OpenaiCompatible = "openai_compatible",
        /// Decided from the base URL and model name.
        #[default]
        Auto = "auto",
    }
}

wire_names! {
    /// How far the `shell` tool's sandbox can confine a command on this host
    /// (`Confinement.level`, docs/sandbox.md).
    #[derive(Default)]
    pub enum ConfinementLevel {
        /// Every layer: filesystem (Landlock, with signal and abstract-socket scoping),
        /// seccomp, no network, resource limits and a bound on processes.
        Full = "full",
        /// Filesystem, network and resource limits are enforced; something else is missing
        /// (listed in `Confinement.missing`).
        Partial = "partial",
        /// The filesystem or the network cannot be confined: the cluster profile refuses
        /// to run commands.
        #[default]
        None = "none",
    }
}

wire_names! {
    /// What bounds the number of processes a command may start (`Confinement.process_limit`).
    #[derive(Default)]
    pub enum ProcessLimit {
        /// `RLIMIT_NPROC` (it counts every process of the backend's user).
        Rlimit = "rlimit",
        /// A pids cgroup per command (for root, whom `RLIMIT_NPROC` does not bind).
        Cgroup = "cgroup",
        /// Nothing: root without a writable pids cgroup.
        #[default]
        None = "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(known: &[T], wire: &[&str])
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug + for<'a> From<&'a str>,
    {
        let names: Vec<String> = known
            .iter()
            .map(|v| {
                serde_json::to_value(v)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(names, wire);
        for (value, name) in known.iter().zip(wire) {
            assert_eq!(&T::from(*name), value);
            assert_eq!(
                &serde_json::from_value::<T>(serde_json::json!(name)).unwrap(),
                value
            );
        }
    }

    #[test]
    fn known_names_are_the_documented_wire_names() {
        round_trips(
            RunStatus::KNOWN,
            &["queued", "running", "completed", "failed", "interrupted"],
        );
        round_trips(SessionStatus::KNOWN, &["idle", "running", "archived"]);
        round_trips(
            RunFailureCode::KNOWN,
            &[
                "model_auth",
                "model_bad_request",
                "model_rate_limited",
                "model_server_error",
                "model_timeout",
                "model_network",
                "model_protocol",
                "model_not_configured",
                "settings",
                "step_limit",
                "runtime_error",
                "blocked_by_hook",
                "goal_budget_exhausted",
                "goal_failed",
            ],
        );
        round_trips(ApiType::KNOWN, &["anthropic", "openai_compatible", "auto"]);
        round_trips(ConfinementLevel::KNOWN, &["full", "partial", "none"]);
        round_trips(ProcessLimit::KNOWN, &["rlimit", "cgroup", "none"]);
    }

    #[test]
    fn unknown_names_are_kept_as_written() {
        let code: RunFailureCode = serde_json::from_value(serde_json::json!("cancelled")).unwrap();
        assert_eq!(code, RunFailureCode::Other("cancelled".into()));
        assert_eq!(
            serde_json::to_value(&code).unwrap(),
            serde_json::json!("cancelled")
        );
        assert_eq!(ApiType::from("a"), ApiType::Other("a".into()));
        assert_eq!(
            RunStatus::from(String::from("paused")).to_string(),
            "paused"
        );
        assert_eq!(format!("[{:<8}]", SessionStatus::Idle), "[idle    ]");
        assert_eq!(SessionStatus::from("idle"), SessionStatus::Idle);
        assert!(SessionStatus::Idle == "idle");
        assert!("running" == SessionStatus::Running);
        assert!(SessionStatus::Idle != "running");
    }
}
