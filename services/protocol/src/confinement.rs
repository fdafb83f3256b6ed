//! What the `shell` tool's sandbox can enforce on a host: `hello`'s `confinement` and
//! `lumina-backend doctor` (docs/sandbox.md).

use serde::{Deserialize, Serialize};

use crate::state::{ConfinementLevel, ProcessLimit};

/// The confinement available on the host a backend runs on, as probed at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Confinement {
    /// `full`, `partial` or `none`.
    pub level: ConfinementLevel,
    /// The kernel's Landlock ABI version; 0 when Landlock is unavailable (the filesystem
    /// cannot be confined).
    pub landlock_abi: u32,
    /// Seccomp filters can be installed (socket families, namespace and module syscalls).
    pub seccomp: bool,
    /// Commands can get an empty network namespace (needs `CAP_SYS_ADMIN`); without it the
    /// seccomp filter alone keeps them off the network.
    pub network_namespace: bool,
    /// Resource limits (CPU time, address space, file size, processes) can be set.
    pub rlimits: bool,
    /// What bounds the number of processes.
    pub process_limit: ProcessLimit,
    /// What is missing, one line each (empty at `full`).
    pub missing: Vec<String>,
}
