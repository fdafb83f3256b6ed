//! AppRoot layout and settings with their precedence (docs/design.md#approot-and-settings).
//!
//! [`AppRoot`] resolves the one directory Lumina owns and names every well-known path in
//! it. [`load`] merges the settings layers (compiled defaults < user settings.json <
//! project defaults < environment < command line) into a typed [`Settings`]; secrets are
//! [`Secret`]s that never print. [`Env`] is the environment snapshot both read, so tests
//! never mutate the process environment.

mod app_root;
mod env;
mod error;
mod keys;
mod layers;
mod memory_models;
mod peers;
mod secret;
mod settings;
mod trust;

pub use app_root::{project_id, AppRoot, LUMINA_HOME};
pub use env::Env;
pub use error::{Error, Result};
pub use keys::{setting_keys, InvalidValue};
pub use layers::{env_layer, is_memory_model_key, load, project_defaults_file};
pub use memory_models::{MemoryEmbeddings, MemoryModels};
pub use peers::{is_token, A2aPeer, PeerNode, PeerSettings, PEER_SCOPES};
pub use secret::Secret;
pub use settings::{
    EndpointSettings, HookEntry, Hooks, MissingModel, ModelSettings, Permissions, Settings,
};
pub use trust::{hooks_fingerprint, project_hooks_trusted, trust_project_hooks, UntrustedHooks};
