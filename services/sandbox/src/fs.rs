//! The filesystem layer: which paths a command may read or write, as a Landlock ruleset
//! built before the fork (its path descriptors opened here, in the parent).

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};

use crate::{Error, Result};

/// The Landlock ABI whose rights we ask for. Pinned (the crate's advice): newer kernels get
/// these rights, older ones what they support (best effort, reported by the probe).
const ABI_USED: ABI = ABI::V6;

/// Toolchain directories, read and execute only.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// Devices a command may open for reading and writing.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Entries of `/etc` that stay out of reach: password hashes, sudo rules, TLS and SSH
/// private keys, systemd credentials, password history.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssl/private",
    "security/opasswd",
    "credstore",
    "credstore.encrypted",
];

/// Where a symlink in `/etc` may point for its target to be granted (not into `/proc`,
/// `/run` or a home directory).
const LINK_TARGET_ROOTS: &[&str] = &["/etc", "/usr", "/lib", "/lib64", "/opt", "/bin", "/sbin"];

pub(crate) fn system_read_only() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    etc_entries(Path::new("/etc"), Path::new(""), &mut out);
    out
}

/// `/etc` entry by entry, leaving out [`ETC_SECRETS`] and SSH private keys: Landlock grants
/// whole subtrees, so a directory holding a secret is descended into instead.
fn etc_entries(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let rel_path = rel.join(entry.file_name());
        let path = entry.path();
        let rel_str = rel_path.to_string_lossy();
        if ETC_SECRETS.iter().any(|s| *s == rel_str) || is_ssh_private_key(&rel_path) {
            continue;
        }
        let holds_secret = ETC_SECRETS
            .iter()
            .any(|s| Path::new(s).starts_with(&rel_path) && Path::new(s) != rel_path)
            || rel_path == Path::new("ssh");
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(true);
        if is_link {
            match path.canonicalize() {
                Ok(target)
                    if LINK_TARGET_ROOTS.iter().any(|r| target.starts_with(r))
                        && !is_secret_target(&target) =>
                {
                    out.push(path);
                }
                _ => {}
            }
        } else if holds_secret && path.is_dir() {
            etc_entries(&path, &rel_path, out);
        } else {
            out.push(path);
        }
    }
}

fn is_ssh_private_key(rel: &Path) -> bool {
    rel.starts_with("ssh")
        && rel
            .file_name()
            .map(|n| n.to_string_lossy().ends_with("_key"))
            .unwrap_or(false)
}

fn is_secret_target(target: &Path) -> bool {
    match target.strip_prefix("/etc") {
        Ok(rel) => {
            ETC_SECRETS.iter().any(|s| rel.starts_with(s))
                || is_ssh_private_key(rel)
                || rel.starts_with("ssh") && target.is_dir()
        }
        Err(_) => false,
    }
}

/// Builds the ruleset: everything beneath `read_write` (the workspace and the private
/// temporary directory), read and execute beneath `read_only`, the [`DEVICES`], and
/// nothing else — no `/proc` (other processes' command lines and environments), no `/tmp`,
/// no home directories. Without network, TCP bind and connect are refused too (ABI 4); with
/// it, TCP connections to the kernel's ephemeral port range are (see [`connectable_ports`]).
/// From ABI 6 signals and abstract unix sockets stay inside the sandbox.
pub(crate) fn ruleset(
    read_write: &[PathBuf],
    read_only: &[PathBuf],
    network: bool,
) -> Result<RulesetCreated> {
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))?
        .scope(Scope::from_all(ABI_USED))?;
    ruleset = if network {
        ruleset.handle_access(AccessNet::ConnectTcp)?
    } else {
        ruleset.handle_access(AccessNet::from_all(ABI_USED))?
    };
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(read_only, AccessFs::from_read(ABI_USED)))?
        .add_rules(path_beneath_rules(DEVICES, AccessFs::from_file(ABI_USED)))?;
    if network {
        let ephemeral = ephemeral_ports();
        created = created.add_rules(connectable_ports(ephemeral).map(|port| {
            Ok::<_, landlock::RulesetError>(NetPort::new(port, AccessNet::ConnectTcp))
        }))?;
    }
    for dir in read_write {
        let fd = PathFd::new(dir).map_err(|e| Error::Path {
            path: dir.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        created = created.add_rule(PathBeneath::new(fd, AccessFs::from_all(ABI_USED)))?;
    }
    Ok(created)
}

/// Where this host's listeners on port 0 live: `net.ipv4.ip_local_port_range` (it covers
/// IPv6 too), or Linux's default when it cannot be read.
pub fn ephemeral_ports() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(|p| p.parse::<u16>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .filter(|(low, high)| low <= high)
        .unwrap_or((32768, 60999))
}

/// The TCP ports a command with network may connect to: all but the ephemeral range
/// (`low..=high`). Every listener that binds port 0 gets a port there — the browser tools'
/// DevTools endpoint and their SOCKS5 proxy, MCP's sign-in callback, other sessions'
/// servers —, and Landlock cannot tell loopback from other destinations, so a command with
/// network would otherwise reach them (in the cluster, other tenants' browsers). Servers
/// elsewhere listen on fixed ports, rarely inside that range.
pub(crate) fn connectable_ports((low, high): (u16, u16)) -> impl Iterator<Item = u16> {
    (1..=u16::MAX).filter(move |port| *port < low || *port > high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etc_secrets_are_left_out() {
        let paths = system_read_only();
        for secret in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssl/private",
        ] {
            assert!(
                !paths.iter().any(|p| Path::new(secret).starts_with(p)),
                "{secret} is reachable through {paths:?}"
            );
        }
        assert!(paths.iter().any(|p| p == Path::new("/usr")));
        assert!(paths.iter().any(|p| p == Path::new("/etc/passwd")));
    }

    #[test]
    fn the_ephemeral_range_is_left_out_of_the_connectable_ports() {
        let ports: Vec<u16> = connectable_ports((32768, 60999)).collect();
        assert_eq!(ports.len(), 32767 + (65535 - 60999));
        assert!(ports.contains(&443) && ports.contains(&32767) && ports.contains(&61000));
        assert!(!ports.contains(&0) && !ports.contains(&32768) && !ports.contains(&60999));
        let (low, high) = ephemeral_ports();
        assert!(low <= high && low > 0, "{low}..{high}");
    }

    #[test]
    fn ssh_private_keys_are_recognised() {
        assert!(is_ssh_private_key(Path::new("ssh/ssh_host_ed25519_key")));
        assert!(!is_ssh_private_key(Path::new(
            "ssh/ssh_host_ed25519_key.pub"
        )));
        assert!(!is_ssh_private_key(Path::new("hostname_key")));
    }
}
