//! Killing a shell command together with everything it started.
//!
//! `shell` (and the runtime's hooks) run each command as the leader of a new process group, so a timeout or an
//! interrupt can SIGKILL the whole group (pipelines, background jobs, `make -j` children)
//! instead of just `bash`. This is the crate's only `unsafe`: one `libc::killpg` call.
#![allow(unsafe_code)]

use std::io;

/// Sends SIGKILL to every process in group `pgid`.
pub fn kill_group(pgid: u32) -> io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "process group id out of range")
    })?;
    // 0 would mean our own group and 1 is init's: never what a spawned child's id looks like.
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal process group 0 or 1",
        ));
    }
    // SAFETY: killpg takes two integers and touches no memory of ours. `pgid` is the pid of a
    // child spawned with `process_group(0)`, so it names that child's group; callers only
    // signal before reaping the leader, so the id cannot have been recycled.
    let rc = unsafe { libc::killpg(pgid, libc::SIGKILL) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Kills the group when dropped while armed, so a cancelled tool future (the runtime dropped
/// it) does not leave the command running.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    pub fn new(pgid: Option<u32>) -> Self {
        Self { pgid }
    }

    /// Kills the group now (once).
    pub fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            if let Err(e) = kill_group(pgid) {
                // ESRCH: everything already exited, which is the goal.
                if e.raw_os_error() != Some(libc::ESRCH) {
                    tracing::warn!(pgid, error = %e, "failed to kill shell process group");
                }
            }
        }
    }

    /// The command finished on its own: leave deliberate background jobs alone.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
