//! The child's side: what runs between fork and exec. Everything here was prepared in the
//! parent; the hook only makes system calls (no allocation, no locks), as a forked child of
//! a multi-threaded process must.
#![allow(unsafe_code)]

use std::fs::File;
use std::io::{self, Write};

use landlock::{RulesetCreated, RulesetStatus};
use seccompiler::BpfProgram;

use crate::Limits;

/// The prepared layers of one command.
#[derive(Debug)]
pub(crate) struct Plan {
    pub limits: Limits,
    /// The pids cgroup's `cgroup.procs`, to join it.
    pub cgroup_procs: Option<File>,
    pub unshare_net: bool,
    pub drop_capabilities: bool,
    pub last_capability: u32,
    pub ruleset: Option<RulesetCreated>,
    pub filters: Vec<BpfProgram>,
}

pub(crate) fn install(cmd: &mut tokio::process::Command, mut plan: Plan) {
    // SAFETY: `Plan::enter` runs in the forked child before exec and only makes
    // async-signal-safe system calls on data prepared before the fork (see its comments);
    // it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || plan.enter());
    }
}

impl Plan {
    /// Order matters: limits and the cgroup first (they need no privilege), the network
    /// namespace while CAP_SYS_ADMIN is still held, then capabilities go, then Landlock
    /// (which sets no_new_privs) and last seccomp (which refuses `unshare` from then on).
    fn enter(&mut self) -> io::Result<()> {
        let l = self.limits;
        if l.cpu_seconds > 0 {
            // The soft limit sends SIGXCPU, the hard one a second later SIGKILL.
            set_limit(
                libc::RLIMIT_CPU,
                l.cpu_seconds,
                l.cpu_seconds.saturating_add(1),
            )?;
        }
        if l.address_space_bytes > 0 {
            set_limit(
                libc::RLIMIT_AS,
                l.address_space_bytes,
                l.address_space_bytes,
            )?;
        }
        if l.processes > 0 {
            set_limit(libc::RLIMIT_NPROC, l.processes, l.processes)?;
        }
        if l.file_size_bytes > 0 {
            set_limit(libc::RLIMIT_FSIZE, l.file_size_bytes, l.file_size_bytes)?;
        }
        if let Some(procs) = &self.cgroup_procs {
            // "0" names the writing process; write(2) on an open descriptor.
            let mut procs: &File = procs;
            procs.write_all(b"0")?;
        }
        if self.unshare_net {
            // SAFETY: unshare takes an integer; on failure errno says why.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if self.drop_capabilities {
            drop_capabilities(self.last_capability)?;
        }
        if let Some(ruleset) = self.ruleset.take() {
            match ruleset.restrict_self() {
                Ok(status) if status.ruleset != RulesetStatus::NotEnforced => {}
                Ok(_) => return Err(io::Error::from_raw_os_error(libc::ENOSYS)),
                Err(_) => return Err(io::Error::last_os_error()),
            }
        }
        for filter in &self.filters {
            if seccompiler::apply_filter(filter).is_err() {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn set_limit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct, which lives across the call.
    if unsafe { libc::setrlimit(resource, &limit) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets, so a command
/// run by root keeps root's file ownership but none of its privileges (no raw I/O, no
/// reading other users' files, nothing regained through exec).
fn drop_capabilities(last: u32) -> io::Result<()> {
    for cap in 0..=libc::c_ulong::from(last) {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            // EPERM: not privileged (no CAP_SETPCAP), then there is nothing to drop.
            break;
        }
    }
    // SAFETY: prctl with integer arguments; EINVAL on kernels without ambient sets.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads the header and two data structs (version 3), all on our stack.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIGKILL to one process (what the command left in its cgroup).
pub(crate) fn kill(pid: libc::pid_t) {
    if pid > 1 {
        // SAFETY: kill takes two integers.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
