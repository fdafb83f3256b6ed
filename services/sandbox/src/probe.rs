//! What this host can enforce, probed once per process without confining the caller: the
//! Landlock ABI and seccomp by query, the network namespace by spawning one child that
//! unshares it, the pids cgroup by creating and removing one.
#![allow(unsafe_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;

use lumina_protocol::{Confinement, ConfinementLevel, ProcessLimit};

use crate::cgroup;

/// The facts [`crate::Sandbox::prepare`] plans from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// 0: unavailable.
    pub landlock_abi: u32,
    pub seccomp: bool,
    pub netns: bool,
    /// Where per-command pids cgroups can be created.
    pub cgroup: Option<PathBuf>,
    /// Whether the backend runs as uid 0 (`RLIMIT_NPROC` does not bind root).
    pub root: bool,
    /// The highest capability number (`/proc/sys/kernel/cap_last_cap`).
    pub last_capability: u32,
}

pub(crate) fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        crate::remove_stale_temp_dirs();
        let host = Host {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_filters(),
            netns: network_namespace(),
            cgroup: cgroup::find_base(),
            // SAFETY: getuid has no failure mode and touches no memory.
            root: unsafe { libc::getuid() } == 0,
            last_capability: std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(63),
        };
        tracing::info!(
            landlock_abi = host.landlock_abi,
            seccomp = host.seccomp,
            network_namespace = host.netns,
            pids_cgroup = host.cgroup.is_some(),
            "probed shell confinement"
        );
        host
    })
}

/// What the `shell` tool's sandbox can enforce on this host (probed once; cheap after).
pub fn probe() -> &'static Confinement {
    static REPORT: OnceLock<Confinement> = OnceLock::new();
    REPORT.get_or_init(|| report(host()))
}

/// The wire report of a host's facts.
pub(crate) fn report(host: &Host) -> Confinement {
    let mut missing = Vec::new();
    if host.landlock_abi == 0 {
        missing.push(
            "landlock: unavailable in this kernel; the filesystem is not confined (commands \
             can read and write whatever the backend's user can)"
                .to_string(),
        );
    } else if host.landlock_abi < 6 {
        missing.push(format!(
            "landlock ABI {} (< 6): commands can signal processes outside the sandbox and \
             connect to abstract unix sockets",
            host.landlock_abi
        ));
    }
    if !host.seccomp {
        missing.push(
            "seccomp: unavailable; socket(), namespace, mount and kernel-module calls are not \
             filtered"
                .to_string(),
        );
    }
    let network_confined = host.netns || host.seccomp;
    if !network_confined {
        missing.push("network: commands can use the network".to_string());
    } else if !host.netns {
        missing.push(
            "network namespace: unavailable (needs CAP_SYS_ADMIN); the seccomp filter alone \
             keeps commands off the network"
                .to_string(),
        );
    }
    let process_limit = if host.cgroup.is_some() {
        ProcessLimit::Cgroup
    } else if !host.root {
        ProcessLimit::Rlimit
    } else {
        missing.push(
            "processes: the backend runs as root, whom RLIMIT_NPROC does not bind, and no pids \
             cgroup is writable; a fork bomb is bounded only by the timeout"
                .to_string(),
        );
        ProcessLimit::None
    };
    let level = if host.landlock_abi == 0 || !network_confined {
        ConfinementLevel::None
    } else if missing.is_empty() {
        ConfinementLevel::Full
    } else {
        ConfinementLevel::Partial
    };
    Confinement {
        level,
        landlock_abi: host.landlock_abi,
        seccomp: host.seccomp,
        network_namespace: host.netns,
        rlimits: true,
        process_limit,
        missing,
    }
}

fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with this flag the kernel only returns the ABI version (or an error); the
    // null attribute pointer and size 0 are what the flag requires.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

fn seccomp_filters() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    let action: u32 = SECCOMP_RET_ERRNO;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 through the pointer and changes
    // nothing; `action` outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            &action as *const u32,
        )
    };
    rc == 0
}

/// Spawns `sh -c 'exit 0'` in a new network namespace: the only way to know whether this
/// process may create one (root with CAP_SYS_ADMIN, and no container profile refusing it).
fn network_namespace() -> bool {
    use std::os::unix::process::CommandExt;
    let sh = if std::path::Path::new("/bin/sh").exists() {
        "/bin/sh"
    } else {
        "sh"
    };
    let mut cmd = std::process::Command::new(sh);
    cmd.args(["-c", "exit 0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the hook makes one system call (unshare) and builds an io::Error from errno;
    // both are async-signal-safe and allocate nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn host() -> Host {
        Host {
            landlock_abi: 7,
            seccomp: true,
            netns: true,
            cgroup: Some(PathBuf::from("/sys/fs/cgroup/pids")),
            root: true,
            last_capability: 40,
        }
    }

    #[test]
    fn every_layer_is_full() {
        let r = report(&host());
        assert_eq!(r.level, ConfinementLevel::Full);
        assert_eq!(r.process_limit, ProcessLimit::Cgroup);
        assert_eq!(r.missing, Vec::<String>::new());
    }

    #[test]
    fn root_without_a_cgroup_is_partial() {
        let r = report(&Host {
            cgroup: None,
            ..host()
        });
        assert_eq!(r.level, ConfinementLevel::Partial);
        assert_eq!(r.process_limit, ProcessLimit::None);
        assert_eq!(r.missing.len(), 1);
        let r = report(&Host {
            cgroup: None,
            root: false,
            ..host()
        });
        assert_eq!(r.level, ConfinementLevel::Full);
        assert_eq!(r.process_limit, ProcessLimit::Rlimit);
    }

    #[test]
    fn no_landlock_or_no_network_confinement_is_none() {
        assert_eq!(
            report(&Host {
                landlock_abi: 0,
                ..host()
            })
            .level,
            ConfinementLevel::None
        );
        assert_eq!(
            report(&Host {
                seccomp: false,
                netns: false,
                ..host()
            })
            .level,
            ConfinementLevel::None
        );
        let r = report(&Host {
            netns: false,
            landlock_abi: 5,
            ..host()
        });
        assert_eq!(r.level, ConfinementLevel::Partial);
        assert_eq!(r.missing.len(), 2);
    }
}
