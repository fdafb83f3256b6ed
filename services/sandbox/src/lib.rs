//! Confining a child process (docs/sandbox.md): what the `shell` tool's commands may read,
//! write, reach and consume.
//!
//! A [`Policy`] names the directories a command may write (the session's workspace) and
//! read, the paths that must stay out of reach (the AppRoot), whether it may use the network
//! and its [`Limits`]. [`Sandbox::prepare`] turns it into everything the child needs —
//! the Landlock ruleset (its path descriptors opened), the seccomp BPF programs, a private
//! temporary directory and, for root, a pids cgroup — **before** the fork;
//! [`Sandbox::apply`] installs a `pre_exec` hook that only makes async-signal-safe system
//! calls between fork and exec: `setrlimit`, joining the cgroup, `unshare(CLONE_NEWNET)`,
//! dropping capabilities, `landlock_restrict_self` and `seccomp`.
//!
//! [`probe`] reports what this kernel can enforce, as the wire type
//! [`lumina_protocol::Confinement`] that `hello` and `lumina-backend doctor` show.

mod cgroup;
mod child;
mod fs;
mod path_dirs;
mod probe;
mod seccomp;

use std::path::{Path, PathBuf};

pub use fs::ephemeral_ports;
pub use lumina_protocol::{Confinement, ConfinementLevel, ProcessLimit};
pub use probe::probe;

/// Why a command cannot be confined.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required layer is not available on this host (`Enforcement::Required`).
    #[error("the shell cannot be confined on this host: {0}")]
    Unavailable(String),
    /// A path that must stay out of reach lies inside a directory the command may use.
    #[error("`{protected}` lies inside `{granted}`, which commands may access; move one of them")]
    ProtectedPathReachable {
        protected: PathBuf,
        granted: PathBuf,
    },
    /// A directory the command must be able to use does not exist or cannot be opened.
    #[error("cannot open `{path}` for the sandbox: {source}")]
    Path {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
    #[error("cannot create the command's temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Resource limits of one command and everything it starts; 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`, per process): SIGXCPU, then SIGKILL a second later.
    pub cpu_seconds: u64,
    /// Address space in bytes (`RLIMIT_AS`, per process).
    pub address_space_bytes: u64,
    /// Processes: the pids cgroup's `pids.max` when there is one, and `RLIMIT_NPROC`
    /// (which counts every process of the user, and does not bind root).
    pub processes: u64,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`): SIGXFSZ beyond it.
    pub file_size_bytes: u64,
}

impl Limits {
    /// Default CPU time: 600 s, the longest `shell` timeout.
    pub const DEFAULT_CPU_SECONDS: u64 = 600;
    /// Default address space: 8 GiB (runtimes such as V8 reserve large virtual ranges).
    pub const DEFAULT_ADDRESS_SPACE_BYTES: u64 = 8 << 30;
    /// Default processes: 1024.
    pub const DEFAULT_PROCESSES: u64 = 1024;
    /// Default largest file: 4 GiB.
    pub const DEFAULT_FILE_SIZE_BYTES: u64 = 4 << 30;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: Self::DEFAULT_CPU_SECONDS,
            address_space_bytes: Self::DEFAULT_ADDRESS_SPACE_BYTES,
            processes: Self::DEFAULT_PROCESSES,
            file_size_bytes: Self::DEFAULT_FILE_SIZE_BYTES,
        }
    }
}

/// What happens when a layer is not available on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Refuse ([`Error::Unavailable`]) unless the filesystem, the network and the resource
    /// limits can all be enforced (level `partial` or `full`); the cluster profile.
    Required,
    /// Apply what the kernel offers and say what is missing ([`Sandbox::missing`]).
    BestEffort,
}

/// What one command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Directories it may read, write and execute in (the session's workspace). The
    /// sandbox adds a private temporary directory.
    pub read_write: Vec<PathBuf>,
    /// Directories it may read and execute besides the system's ([`system_read_only`]).
    pub read_only: Vec<PathBuf>,
    /// Paths that must stay out of reach (the AppRoot): preparing fails when one lies
    /// inside a granted directory.
    pub protected: Vec<PathBuf>,
    /// Whether it may use the network. Off: an empty network namespace when the kernel
    /// allows it, and always a seccomp filter refusing `socket()` and Landlock refusing TCP.
    pub network: bool,
    pub limits: Limits,
    pub enforcement: Enforcement,
}

impl Policy {
    /// A policy for a workspace with the default limits, no network, best effort.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            read_write: vec![workspace.into()],
            read_only: Vec::new(),
            protected: Vec::new(),
            network: false,
            limits: Limits::default(),
            enforcement: Enforcement::BestEffort,
        }
    }
}

/// The system directories every command may read and execute (those that exist): the
/// toolchain (`/usr`, `/bin`, `/sbin`, `/lib*`, `/opt`), `/etc` without its secrets
/// (docs/sandbox.md lists them) and a few devices.
pub fn system_read_only() -> Vec<PathBuf> {
    fs::system_read_only()
}

/// One command's confinement, prepared before it is spawned.
#[derive(Debug)]
pub struct Sandbox {
    temp: tempfile::TempDir,
    plan: Option<child::Plan>,
    cgroup: Option<cgroup::PidsCgroup>,
    missing: Vec<String>,
    level: ConfinementLevel,
}

impl Sandbox {
    /// Prepares the confinement of one command: checks the policy against what the host
    /// can enforce, creates the private temporary directory, builds the Landlock ruleset
    /// and the seccomp programs and, when processes are bounded by a cgroup, creates it.
    pub fn prepare(policy: &Policy) -> Result<Sandbox> {
        let host = probe::host();
        let report = probe::probe();
        if policy.enforcement == Enforcement::Required && report.level == ConfinementLevel::None {
            return Err(Error::Unavailable(report.missing.join("; ")));
        }
        let temp = tempfile::Builder::new()
            .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(Error::TempDir)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(Error::TempDir)?;
        }
        let mut read_write = Vec::with_capacity(policy.read_write.len() + 1);
        for dir in policy
            .read_write
            .iter()
            .map(PathBuf::as_path)
            .chain([temp.path()])
        {
            read_write.push(canonical(dir)?);
        }
        let mut missing = report.missing.clone();
        let mut read_only: Vec<PathBuf> = fs::system_read_only();
        for dir in &policy.read_only {
            match dir.canonicalize() {
                Ok(dir) => read_only.push(dir),
                // An extra directory that is not there is simply not granted.
                Err(e) => missing.push(format!("read path `{}`: {e}", dir.display())),
            }
        }
        // Toolchains in the home directory that `PATH` names (pyenv, rustup …), unless one
        // would expose a protected path.
        let home = std::env::var_os("HOME").map(PathBuf::from);
        for dir in path_dirs::home_toolchains(std::env::var_os("PATH").as_deref(), home.as_deref())
        {
            let exposes = policy.protected.iter().any(|p| {
                p.canonicalize()
                    .unwrap_or_else(|_| p.clone())
                    .starts_with(&dir)
            });
            if !exposes && !read_only.contains(&dir) {
                read_only.push(dir);
            }
        }
        check_protected(&policy.protected, read_write.iter().chain(&read_only))?;

        let ruleset = if host.landlock_abi > 0 {
            Some(fs::ruleset(&read_write, &read_only, policy.network)?)
        } else {
            None
        };
        let filters = if host.seccomp {
            seccomp::programs(policy.network)?
        } else {
            Vec::new()
        };
        // The process bound is not one of the layers `Required` insists on: a cgroup that
        // cannot be created is reported, not fatal.
        let mut cgroup = match (&host.cgroup, policy.limits.processes) {
            (Some(base), max) if max > 0 => match cgroup::PidsCgroup::create(base, max) {
                Ok(group) => Some(group),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot create the command's pids cgroup");
                    missing.push(format!("processes: cannot create a pids cgroup: {e}"));
                    None
                }
            },
            _ => None,
        };
        let cgroup_procs = match cgroup.as_ref().map(cgroup::PidsCgroup::procs_file) {
            Some(Ok(file)) => Some(file),
            Some(Err(e)) => {
                missing.push(format!("processes: cannot join the pids cgroup: {e}"));
                if let Some(group) = cgroup.take() {
                    let _ = group.remove();
                }
                None
            }
            None => None,
        };
        if policy.network {
            missing.retain(|m| !m.starts_with("network"));
        }
        let plan = child::Plan {
            limits: policy.limits,
            cgroup_procs,
            unshare_net: !policy.network && host.netns,
            drop_capabilities: true,
            last_capability: host.last_capability,
            ruleset,
            filters,
        };
        Ok(Sandbox {
            temp,
            plan: Some(plan),
            cgroup,
            missing,
            level: report.level.clone(),
        })
    }

    /// The command's private temporary directory (its `TMPDIR` and `HOME`), removed with
    /// the sandbox.
    pub fn temp_dir(&self) -> &Path {
        self.temp.path()
    }

    /// What this host could not enforce, one line each (empty at level `full`).
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    /// The level this host offers.
    pub fn level(&self) -> &ConfinementLevel {
        &self.level
    }

    /// Confines `cmd`: sets `TMPDIR` and `HOME` to the private temporary directory and
    /// installs the hook that applies the prepared layers in the child. Call once, before
    /// spawning; the hook runs in each process spawned from `cmd`.
    pub fn apply(&mut self, cmd: &mut tokio::process::Command) {
        cmd.env("TMPDIR", self.temp.path())
            .env("HOME", self.temp.path());
        if let Some(plan) = self.plan.take() {
            child::install(cmd, plan);
        }
    }

    /// Kills whatever the command left in its cgroup and removes the cgroup and the
    /// temporary directory. Dropping the sandbox does the same, logging failures.
    pub fn finish(mut self) {
        self.cleanup();
    }

    fn cleanup(&mut self) {
        if let Some(group) = self.cgroup.take() {
            if let Err(e) = group.remove() {
                tracing::warn!(error = %e, "cannot remove the command's pids cgroup");
            }
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Temporary directories are `<tmp>/lumina-shell-<backend pid>-<random>`.
const TEMP_PREFIX: &str = "lumina-shell-";

/// Removes the temporary directories of backends that are gone (killed before they could
/// clean up); a live process's are left alone.
pub(crate) fn remove_stale_temp_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn canonical(dir: &Path) -> Result<PathBuf> {
    dir.canonicalize().map_err(|source| Error::Path {
        path: dir.to_path_buf(),
        source,
    })
}

/// Landlock grants whole subtrees and cannot carve an exception out of one: a protected
/// path inside a granted directory would be reachable, so refuse to prepare.
fn check_protected<'a>(
    protected: &[PathBuf],
    granted: impl Iterator<Item = &'a PathBuf> + Clone,
) -> Result<()> {
    for path in protected {
        let path = path.canonicalize().unwrap_or_else(|_| path.clone());
        if let Some(dir) = granted.clone().find(|g| path.starts_with(g)) {
            return Err(Error::ProtectedPathReachable {
                protected: path,
                granted: dir.clone(),
            });
        }
    }
    Ok(())
}
