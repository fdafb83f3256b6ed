//! The faults: what each kind needs (checked before any load is sent), how it is injected
//! into one instance or service, and how it is healed — by the trial, or by the guard's
//! `Drop` when a trial ends early, so a stopped process, a cut or shaped veth or a skewed
//! clock never outlives the run.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, HarnessError};
use crate::instances::{self, Instance, Instances};

/// The fault kinds, in the order `all` runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// `kill -9` of a session owner, restarted after the hold.
    Kill,
    /// SIGSTOP of a session owner for longer than its liveness TTL, then SIGCONT.
    Sigstop,
    /// Redis killed and started again empty on the same port.
    RedisRestart,
    /// PostgreSQL shut down (immediate and fast, alternately) and started again.
    PostgresRestart,
    /// The veth of the instance in its network namespace cut (link down) and restored.
    Partition,
    /// The PostgreSQL traffic of the instance in the namespace shaped to a crawl (tc HTB).
    SlowPostgres,
    /// The wall clock of the libfaketime instance moved ahead or behind, then back.
    ClockSkew,
}

impl FaultKind {
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Kill,
        FaultKind::Sigstop,
        FaultKind::RedisRestart,
        FaultKind::PostgresRestart,
        FaultKind::Partition,
        FaultKind::SlowPostgres,
        FaultKind::ClockSkew,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Sigstop => "sigstop",
            FaultKind::RedisRestart => "redis-restart",
            FaultKind::PostgresRestart => "postgres-restart",
            FaultKind::Partition => "partition",
            FaultKind::SlowPostgres => "slow-postgres",
            FaultKind::ClockSkew => "clock-skew",
        }
    }

    /// Parses a comma-separated list; `all` is every kind.
    pub fn parse_list(text: &str) -> Result<Vec<FaultKind>, Error> {
        let mut kinds = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "all" {
                kinds.extend(FaultKind::ALL);
                continue;
            }
            let kind = FaultKind::ALL
                .into_iter()
                .find(|k| k.name() == item)
                .ok_or_else(|| {
                    let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
                    Error::Input(format!(
                        "unknown fault {item:?} (one of {}, or all)",
                        names.join(", ")
                    ))
                })?;
            kinds.push(kind);
        }
        kinds.dedup();
        if kinds.is_empty() {
            return Err(Error::Input("--fault names no fault".into()));
        }
        Ok(kinds)
    }

    /// How long the fault lasts before it is healed, by default.
    pub fn default_hold(self, ttl: Duration) -> Duration {
        let past_ttl = ttl * 2 + Duration::from_millis(500);
        match self {
            FaultKind::Kill => ttl * 2,
            FaultKind::Sigstop | FaultKind::Partition => past_ttl,
            FaultKind::RedisRestart | FaultKind::PostgresRestart => Duration::from_secs(1),
            FaultKind::SlowPostgres => (ttl * 2).max(Duration::from_secs(3)),
            FaultKind::ClockSkew => past_ttl,
        }
    }

    /// How long after the injection the fault is in effect (libfaketime re-reads its file
    /// about every second); the recovery time is counted from then.
    pub fn settle(self) -> Duration {
        match self {
            FaultKind::ClockSkew => Duration::from_millis(2500),
            _ => Duration::ZERO,
        }
    }

    /// Whether the fault hits one instance (the others keep serving).
    pub fn targets_instance(self) -> bool {
        !matches!(self, FaultKind::RedisRestart | FaultKind::PostgresRestart)
    }
}

/// Fault settings shared by every trial.
#[derive(Debug, Clone)]
pub(crate) struct FaultSettings {
    pub skew: Duration,
    pub slow_kbit: u32,
}

fn run(program: &str, args: &[&str]) -> Result<(), HarnessError> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| HarnessError::Spawn {
            program: program.into(),
            source,
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(HarnessError::Failed {
        command: format!("{program} {}", args.join(" ")),
        detail: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

fn has_command(program: &str, probe: &[&str]) -> bool {
    Command::new(program)
        .args(probe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// One command on the `lumina-chaos-services` control socket; `Err` on `error: …`.
pub(crate) fn control(socket: &Path, command: &str) -> Result<(), HarnessError> {
    let mut stream = UnixStream::connect(socket)
        .map_err(|e| HarnessError::io("cannot reach the services' control socket", e))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .map_err(|e| HarnessError::io("control socket", e))?;
    writeln!(stream, "{command}").map_err(|e| HarnessError::io("control socket", e))?;
    let mut reply = String::new();
    BufReader::new(&stream)
        .read_line(&mut reply)
        .map_err(|e| HarnessError::io("control socket", e))?;
    match reply.trim() {
        "ok" => Ok(()),
        other => Err(HarnessError::Failed {
            command: format!("services: {command}"),
            detail: other.to_string(),
        }),
    }
}

/// The instance a kind needs, if it needs a particular one.
fn special(kind: FaultKind, instances: &Instances) -> Option<usize> {
    match kind {
        FaultKind::Partition | FaultKind::SlowPostgres => {
            instances.instances.iter().position(|i| i.netns.is_some())
        }
        FaultKind::ClockSkew => instances
            .instances
            .iter()
            .position(|i| i.faketime.is_some()),
        _ => None,
    }
}

/// Checks that `kind` can be injected here; the message says what is missing.
pub(crate) fn preflight(kind: FaultKind, instances: &Instances) -> Result<(), HarnessError> {
    let name = kind.name();
    let missing = HarnessError::Unavailable;
    let need_root = |what: &str| match effective_uid() {
        Some(0) => Ok(()),
        uid => Err(missing(format!(
            "fault {name} needs root (CAP_NET_ADMIN) to {what}; running as uid {}",
            uid.map_or("unknown".into(), |u| u.to_string())
        ))),
    };
    match kind {
        FaultKind::Kill | FaultKind::Sigstop => {
            if instances.instances.len() < 2 {
                return Err(missing(format!(
                    "fault {name} needs at least two instances"
                )));
            }
            if let Some(i) = instances.instances.iter().find(|i| i.restart.is_none()) {
                return Err(missing(format!("instance {} has no restart command", i.id)));
            }
            Ok(())
        }
        FaultKind::RedisRestart | FaultKind::PostgresRestart => {
            let services = instances.services.as_ref().ok_or_else(|| {
                missing(format!(
                    "fault {name} needs controllable services: start the cluster with \
                     `scripts/local-cluster --chaos`"
                ))
            })?;
            control(&services.control, "ping")
        }
        FaultKind::Partition | FaultKind::SlowPostgres => {
            let i = special(kind, instances).ok_or_else(|| {
                missing(format!(
                    "fault {name} needs an instance inside a network namespace: start the \
                     cluster with `scripts/local-cluster --chaos --netns-instance`"
                ))
            })?;
            need_root("change the veth of the namespace")?;
            if !has_command("ip", &["-V"]) {
                return Err(missing(format!(
                    "fault {name} needs `ip` (Debian package iproute2)"
                )));
            }
            if kind == FaultKind::SlowPostgres && !has_command("tc", &["-V"]) {
                return Err(missing(format!(
                    "fault {name} needs `tc` (Debian package iproute2)"
                )));
            }
            if kind == FaultKind::SlowPostgres
                && instances
                    .services
                    .as_ref()
                    .and_then(|s| s.postgres_port)
                    .is_none()
            {
                return Err(missing(format!(
                    "fault {name} needs the PostgreSQL port (services)"
                )));
            }
            let netns = instances.instances[i]
                .netns
                .as_ref()
                .map(|n| n.name.clone());
            match netns {
                Some(n) if Path::new("/run/netns").join(&n).exists() => Ok(()),
                n => Err(missing(format!(
                    "the network namespace {n:?} does not exist"
                ))),
            }
        }
        FaultKind::ClockSkew => {
            let i = special(kind, instances).ok_or_else(|| {
                missing(format!(
                    "fault {name} needs an instance under libfaketime: start the cluster \
                     with `scripts/local-cluster --chaos --faketime-instance` (Debian \
                     package faketime)"
                ))
            })?;
            let instance = &instances.instances[i];
            let env = instance
                .restart
                .as_ref()
                .and_then(|r| r.env_file.as_ref())
                .map(|f| instances::read_env_file(f))
                .transpose()?
                .unwrap_or_default();
            match env.get("LD_PRELOAD") {
                Some(lib) if lib.contains("faketime") && Path::new(lib).is_file() => {}
                _ => {
                    return Err(missing(format!(
                        "instance {} does not preload an existing libfaketime",
                        instance.id
                    )))
                }
            }
            let file = instance.faketime.as_ref().map(|f| f.file.clone());
            match file {
                Some(f) if f.is_file() => Ok(()),
                f => Err(missing(format!("the libfaketime file {f:?} is missing"))),
            }
        }
    }
}

/// The instance a trial's fault hits (the owner of its probe session).
pub(crate) fn pick_target(kind: FaultKind, instances: &Instances, trial: usize) -> usize {
    if let Some(i) = special(kind, instances) {
        return i;
    }
    trial % instances.instances.len()
}

/// One injected fault; healed by [`Fault::heal`] or, failing that, on drop.
pub(crate) struct Fault<'a> {
    pub kind: FaultKind,
    pub instances: &'a Instances,
    pub target: usize,
    pub trial: usize,
    pub settings: &'a FaultSettings,
    pub children: &'a mut HashMap<usize, Child>,
    /// What was done, for the report (`host veth down`, `-5s`, …).
    pub method: String,
    injected: bool,
}

impl<'a> Fault<'a> {
    pub fn new(
        kind: FaultKind,
        instances: &'a Instances,
        target: usize,
        trial: usize,
        settings: &'a FaultSettings,
        children: &'a mut HashMap<usize, Child>,
    ) -> Fault<'a> {
        Fault {
            kind,
            instances,
            target,
            trial,
            settings,
            children,
            method: String::new(),
            injected: false,
        }
    }

    fn instance(&self) -> &Instance {
        &self.instances.instances[self.target]
    }

    fn control_socket(&self) -> Result<&Path, HarnessError> {
        self.instances
            .services
            .as_ref()
            .map(|s| s.control.as_path())
            .ok_or_else(|| HarnessError::Unavailable("no services control socket".into()))
    }

    fn netns(&self) -> Result<&instances::Netns, HarnessError> {
        self.instance().netns.as_ref().ok_or_else(|| {
            HarnessError::Unavailable(format!(
                "instance {} has no network namespace",
                self.instance().id
            ))
        })
    }

    /// Injects the fault (blocking; quick).
    pub fn inject(&mut self) -> Result<(), HarnessError> {
        let odd = self.trial % 2 == 1;
        let pid = self.instance().current_pid();
        match self.kind {
            FaultKind::Kill => {
                let mut child = self.children.remove(&self.target);
                self.method = format!("kill -9 {pid}");
                instances::kill9(pid, child.as_mut())?;
            }
            FaultKind::Sigstop => {
                self.method = format!("SIGSTOP {pid}");
                instances::signal_backend(pid, "STOP")?;
            }
            FaultKind::RedisRestart => {
                self.method = "redis-server killed".into();
                control(self.control_socket()?, "redis stop")?;
            }
            FaultKind::PostgresRestart => {
                let how = if odd { "stop" } else { "kill" };
                self.method = format!(
                    "postgres {how} (shutdown mode {})",
                    if odd { "fast" } else { "immediate" }
                );
                control(self.control_socket()?, &format!("postgres {how}"))?;
            }
            FaultKind::Partition => {
                let n = self.netns()?.clone();
                if odd {
                    self.method = format!("{} (in {}) down", n.ns_if, n.name);
                    run("ip", &["-n", &n.name, "link", "set", &n.ns_if, "down"])?;
                } else {
                    self.method = format!("{} (host end) down", n.host_if);
                    run("ip", &["link", "set", &n.host_if, "down"])?;
                }
            }
            FaultKind::SlowPostgres => {
                let n = self.netns()?.clone();
                let port = self
                    .instances
                    .services
                    .as_ref()
                    .and_then(|s| s.postgres_port)
                    .ok_or_else(|| HarnessError::Unavailable("no PostgreSQL port".into()))?;
                let kbit = self.settings.slow_kbit;
                self.method = format!("tc htb {kbit}kbit for port {port} on both veth ends");
                self.injected = true;
                shape(None, &n.host_if, "sport", port, kbit)?;
                shape(Some(&n.name), &n.ns_if, "dport", port, kbit)?;
            }
            FaultKind::ClockSkew => {
                let secs = self.settings.skew.as_secs_f64();
                let offset = if odd {
                    format!("-{secs}s")
                } else {
                    format!("+{secs}s")
                };
                self.method = format!("wall clock {offset}");
                self.write_offset(&offset)?;
            }
        }
        self.injected = true;
        Ok(())
    }

    fn write_offset(&self, offset: &str) -> Result<(), HarnessError> {
        let file = self
            .instance()
            .faketime
            .as_ref()
            .map(|f| f.file.clone())
            .ok_or_else(|| HarnessError::Unavailable("no libfaketime file".into()))?;
        std::fs::write(&file, format!("{offset}\n"))
            .map_err(|e| HarnessError::io(format!("cannot write {}", file.display()), e))
    }

    /// Heals the fault (blocking). A killed instance is started again (readiness is the
    /// caller's to wait for).
    pub fn heal(&mut self) -> Result<(), HarnessError> {
        if !self.injected {
            return Ok(());
        }
        self.injected = false;
        let odd = self.trial % 2 == 1;
        match self.kind {
            FaultKind::Kill => {
                let child = instances::restart(self.instance())?;
                self.children.insert(self.target, child);
                Ok(())
            }
            FaultKind::Sigstop => instances::signal_backend(self.instance().current_pid(), "CONT"),
            FaultKind::RedisRestart => control(self.control_socket()?, "redis start"),
            FaultKind::PostgresRestart => control(self.control_socket()?, "postgres start"),
            FaultKind::Partition => {
                let n = self.netns()?.clone();
                if odd {
                    run("ip", &["-n", &n.name, "link", "set", &n.ns_if, "up"])
                } else {
                    run("ip", &["link", "set", &n.host_if, "up"])
                }
            }
            FaultKind::SlowPostgres => {
                let n = self.netns()?.clone();
                let a = run("tc", &["qdisc", "del", "dev", &n.host_if, "root"]);
                let b = run(
                    "ip",
                    &[
                        "netns", "exec", &n.name, "tc", "qdisc", "del", "dev", &n.ns_if, "root",
                    ],
                );
                a.and(b)
            }
            FaultKind::ClockSkew => self.write_offset("+0"),
        }
    }
}

/// An HTB qdisc on `dev` (in namespace `ns`) that sends the traffic whose `dir` port
/// (`sport`/`dport`) is `port` through a class limited to `kbit`, everything else unlimited.
fn shape(ns: Option<&str>, dev: &str, dir: &str, port: u16, kbit: u32) -> Result<(), HarnessError> {
    let tc = |args: &[&str]| -> Result<(), HarnessError> {
        match ns {
            Some(ns) => {
                let mut full = vec!["netns", "exec", ns, "tc"];
                full.extend_from_slice(args);
                run("ip", &full)
            }
            None => run("tc", args),
        }
    };
    let rate = format!("{kbit}kbit");
    let port = port.to_string();
    tc(&[
        "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10",
    ])
    .map_err(|e| with_hint(e, "does the kernel have sch_htb?"))?;
    tc(&[
        "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit",
    ])?;
    tc(&[
        "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", &rate,
        "ceil", &rate, "burst", "1600", "cburst", "1600",
    ])?;
    tc(&[
        "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
        "ip", dir, &port, "0xffff", "flowid", "1:20",
    ])
    .map_err(|e| with_hint(e, "does the kernel have cls_u32?"))
}

/// A failed command's error with a hint at the likely cause.
fn with_hint(error: HarnessError, hint: &str) -> HarnessError {
    match error {
        HarnessError::Failed { command, detail } => HarnessError::Failed {
            command,
            detail: format!("{detail} ({hint})"),
        },
        other => other,
    }
}

impl Drop for Fault<'_> {
    fn drop(&mut self) {
        if self.injected {
            if let Err(e) = self.heal() {
                eprintln!("lumina-loadtest: healing {} failed: {e}", self.kind.name());
            }
        }
    }
}
