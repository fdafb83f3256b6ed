//! A pids cgroup per command: the only bound on processes that holds for root, whom
//! `RLIMIT_NPROC` does not bind. cgroup v1 (a `pids` hierarchy) or v2 (with `pids` in the
//! backend's own cgroup's `subtree_control`).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The directory under which this process can create pids cgroups, if any: found from
/// `/proc/self/mountinfo` and `/proc/self/cgroup`, and tried once.
pub(crate) fn find_base() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    let candidates = candidates(&mountinfo, &membership);
    for base in &candidates {
        remove_stale(base);
    }
    candidates.into_iter().find(|base| {
        let probe = base.join(format!("lumina-probe-{}", std::process::id()));
        let works = fs::create_dir(&probe).is_ok() && probe.join("pids.max").exists();
        let _ = fs::remove_dir(&probe);
        works
    })
}

/// Removes the empty cgroups of backends that died before removing their own (`rmdir`
/// refuses a cgroup that still has processes); a live backend's are left alone.
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("lumina-shell-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// v1 `pids` hierarchies first, then v2 where `pids` is delegated to children.
fn candidates(mountinfo: &str, membership: &str) -> Vec<PathBuf> {
    let mut v1 = Vec::new();
    let mut v2 = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount), Some(fstype), Some(options)) =
            (left.get(3), left.get(4), right.first(), right.get(2))
        else {
            continue;
        };
        let own = |controller: &str| {
            membership.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let matches = if controller.is_empty() {
                    controllers.is_empty()
                } else {
                    controllers.split(',').any(|c| c == controller)
                };
                matches.then(|| path.to_string())
            })
        };
        let place = |path: String| {
            let rel = Path::new(&path)
                .strip_prefix(root)
                .map(Path::to_path_buf)
                .unwrap_or_default();
            Path::new(mount).join(rel)
        };
        if *fstype == "cgroup" && options.split(',').any(|o| o == "pids") {
            if let Some(path) = own("pids") {
                v1.push(place(path));
            }
        } else if *fstype == "cgroup2" {
            if let Some(path) = own("") {
                let dir = place(path);
                let delegated = fs::read_to_string(dir.join("cgroup.subtree_control"))
                    .map(|s| s.split_whitespace().any(|c| c == "pids"))
                    .unwrap_or(false);
                if delegated {
                    v2.push(dir);
                }
            }
        }
    }
    v1.extend(v2);
    v1
}

/// One command's cgroup.
#[derive(Debug)]
pub(crate) struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    pub(crate) fn create(base: &Path, max: u64) -> io::Result<Self> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("lumina-shell-{}-{n}", std::process::id()));
        fs::create_dir(&dir)?;
        let group = Self { dir };
        fs::write(group.dir.join("pids.max"), max.to_string())?;
        Ok(group)
    }

    /// `cgroup.procs`, opened for the child to write `0` into (joining the group).
    pub(crate) fn procs_file(&self) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
    }

    /// Kills what is left in the group and removes it.
    pub(crate) fn remove(self) -> io::Result<()> {
        let procs = self.dir.join("cgroup.procs");
        let mut last = Ok(());
        for _ in 0..100 {
            let pids: Vec<libc::pid_t> = fs::read_to_string(&procs)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if pids.is_empty() {
                match fs::remove_dir(&self.dir) {
                    Ok(()) => return Ok(()),
                    Err(e) => last = Err(e),
                }
            }
            for pid in pids {
                crate::child::kill(pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn finds_v1_and_delegated_v2_hierarchies() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory
";
        let membership = "8:pids:/box\n4:memory:/x\n0::/\n";
        assert_eq!(
            candidates(mountinfo, membership),
            vec![PathBuf::from("/sys/fs/cgroup/pids/box")]
        );
        assert_eq!(
            candidates("garbage line\n", membership),
            Vec::<PathBuf>::new()
        );
    }
}
