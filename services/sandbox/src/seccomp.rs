//! The seccomp layer, compiled to BPF before the fork: no sockets without network, no new
//! namespaces, no mounts, keyrings, BPF, kernel modules or reboots.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::Result;

/// System calls refused outright (EPERM). Namespaces and mounts would let a command build
/// its own view around Landlock's; the rest reach the kernel's riskiest surfaces.
const DENIED: &[libc::c_long] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_open_by_handle_at,
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The programs, in the order they are installed. Without network every `socket()` is
/// refused (`socketpair` stays: pipes between processes); with network only unix-domain
/// sockets are, since pathname sockets on the host (a container runtime's, say) are not
/// covered by Landlock. `clone3` answers ENOSYS, so the C library falls back to `clone`,
/// whose flags a filter can see.
pub(crate) fn programs(network: bool) -> Result<Vec<BpfProgram>> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let flag = u64::from(flag.unsigned_abs());
        clone_rules.push(SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    denied.insert(libc::SYS_clone, clone_rules);
    if network {
        denied.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                u64::from(libc::AF_UNIX.unsigned_abs()),
            )?])?],
        );
    } else {
        denied.insert(libc::SYS_socket, Vec::new());
    }
    let errno = |e: libc::c_int| SeccompAction::Errno(e.unsigned_abs());
    let main: BpfProgram =
        SeccompFilter::new(denied, SeccompAction::Allow, errno(libc::EPERM), arch)?.try_into()?;
    let clone3: BpfProgram = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        errno(libc::ENOSYS),
        arch,
    )?
    .try_into()?;
    Ok(vec![main, clone3])
}

#[cfg(test)]
mod tests {
    #[test]
    fn programs_compile_for_this_architecture() {
        for network in [false, true] {
            let programs = super::programs(network).unwrap_or_default();
            assert_eq!(programs.len(), 2, "network {network}");
            assert!(programs.iter().all(|p| !p.is_empty()));
        }
    }
}
