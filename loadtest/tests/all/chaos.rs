//! A short chaos run: `scripts/local-cluster --chaos --netns-instance --faketime-instance`
//! (three instances, one in a network namespace of its own, one under libfaketime), then
//! the `chaos` scenario of the library — the one `scripts/chaos` runs — with 2 trials of
//! each fault kind, asserting that PostgreSQL's journal shows no invariant violation.
//! Correctness only, never timing. Needs root (the namespace, the veth, tc), as CI has.
//!
//! Everything started is stopped by [`Cluster`]'s `Drop`, also when the test fails: the
//! script's process group (its own clean-up stops the instances, the services and the
//! model and deletes the namespace), then whatever the pid files and the instances file
//! still name.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lumina_loadtest::instances::Instances;
use lumina_loadtest::{
    AuthOptions, ChaosOptions, Common, Config, FaultKind, Scenario, TargetOptions,
};

use crate::support::{backend_bin, kill_pid_file};

/// The cluster of `scripts/local-cluster`, stopped on drop.
struct Cluster {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Cluster {
    fn instances_file(&self) -> PathBuf {
        self.dir.join("instances.json")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let instances = Instances::load(&self.instances_file()).ok();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Whatever is left: the script's group, the instances, the namespace.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
        if let Some(instances) = instances {
            for instance in &instances.instances {
                if let Some(file) = &instance.pid_file {
                    kill_pid_file(file);
                }
                if let Some(netns) = &instance.netns {
                    let _ = Command::new("ip")
                        .args(["netns", "del", &netns.name])
                        .stderr(Stdio::null())
                        .status();
                    let _ = Command::new("ip")
                        .args(["link", "del", &netns.host_if])
                        .stderr(Stdio::null())
                        .status();
                }
            }
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?.to_string();
            line.split_whitespace().nth(2).map(|u| u == "0")
        })
        .unwrap_or(false)
}

/// `lumina-scripted-model` next to the other binaries, built on demand.
fn ensure_scripted_model(bin_dir: &Path) {
    if bin_dir.join("lumina-scripted-model").exists() {
        return;
    }
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-p",
            "lumina-testkit",
            "--bin",
            "lumina-scripted-model",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "building lumina-scripted-model failed");
}

/// Three consecutive free loopback ports after a random base.
fn free_base_port() -> u16 {
    for _ in 0..50 {
        let base = 20_000 + (uuid::Uuid::new_v4().as_u128() % 20_000) as u16;
        if (1..=3).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no free ports");
}

async fn start_cluster(tmp: &Path) -> Cluster {
    let backend = backend_bin();
    let bin_dir = backend.parent().unwrap().to_path_buf();
    ensure_scripted_model(&bin_dir);
    assert!(
        bin_dir.join("lumina-chaos-services").exists(),
        "lumina-chaos-services missing in {}",
        bin_dir.display()
    );
    let target_dir = bin_dir.parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/local-cluster");
    let dir = tmp.join("cluster");
    let out = std::fs::File::create(tmp.join("local-cluster.out")).unwrap();
    let child = Command::new("setsid")
        .arg(&script)
        .args([
            "--no-build",
            "--chaos",
            "--netns-instance",
            "--faketime-instance",
        ])
        .args([
            "--instances",
            "3",
            "--lease-ttl-ms",
            "1000",
            "--slow-turns",
            "500",
        ])
        .arg("--base-port")
        .arg(free_base_port().to_string())
        .arg("--dir")
        .arg(&dir)
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("LUMINA_API_KEY")
        .env_remove("LUMINA_CLUSTER_DIR")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let mut cluster = Cluster {
        child,
        dir,
        log: tmp.join("local-cluster.out"),
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    while !cluster.instances_file().exists() {
        let exited = cluster.child.try_wait().unwrap();
        let log = cluster.log();
        assert!(exited.is_none(), "local-cluster exited: {log}");
        assert!(
            Instant::now() < deadline,
            "local-cluster did not start: {log}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster
}

async fn chaos(
    cluster: &Cluster,
    faults: Vec<FaultKind>,
    trials: usize,
) -> lumina_loadtest::Report {
    let config = Config {
        target: TargetOptions {
            instances_file: Some(cluster.instances_file()),
            auth: AuthOptions::auto(),
            ..TargetOptions::default()
        },
        common: Common {
            call_timeout_secs: 20.0,
            run_timeout_secs: 60.0,
            ..Common::default()
        },
        scenario: Scenario::Chaos(ChaosOptions {
            faults,
            trials,
            // Short holds: still past the 1 s TTL where the kind needs it.
            max_duration_secs: 900.0,
            ..ChaosOptions::default()
        }),
        progress: false,
    };
    let run = lumina_loadtest::run(&config);
    match tokio::time::timeout(Duration::from_secs(1200), run).await {
        Ok(report) => report.unwrap(),
        Err(_) => panic!("the chaos run did not end in 20 minutes: {}", cluster.log()),
    }
}

fn assert_clean(report: &lumina_loadtest::Report, trials: u64) {
    eprintln!("{}", report.text_summary());
    let chaos = report.chaos.as_ref().unwrap();
    assert_eq!(report.violation_count, 0, "{:#?}", report.violations);
    for kind in &chaos.kinds {
        assert_eq!(kind.trials_run, trials, "{kind:?}");
        assert_eq!(kind.trials_ok, trials, "{kind:?}: {:#?}", chaos.trials);
        assert!(kind.acked_submits > 0, "{kind:?}");
    }
    for trial in &chaos.trials {
        assert!(
            trial.events_checked > 0 && trial.fence_samples > 0,
            "{trial:?}"
        );
    }
}

/// Every kind but `postgres-restart`, which has a test of its own (below).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_trials_keep_the_journal_invariants() {
    assert!(
        is_root(),
        "the chaos test needs root for the network namespace, the veth and tc (CI runs as root)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let cluster = start_cluster(tmp.path()).await;
    let faults: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|k| *k != FaultKind::PostgresRestart)
        .collect();
    let report = chaos(&cluster, faults, 2).await;
    assert_clean(&report, 2);
    let dir = tempfile::tempdir().unwrap();
    let (_, html) = report.write(dir.path()).unwrap();
    assert!(std::fs::read_to_string(html).unwrap().contains("Chaos"));
    let namespaces: Vec<String> = Instances::load(&cluster.instances_file())
        .unwrap()
        .instances
        .iter()
        .filter_map(|i| i.netns.as_ref().map(|n| n.name.clone()))
        .collect();
    drop(cluster);
    for name in namespaces {
        assert!(
            !Path::new("/run/netns").join(&name).exists(),
            "namespace {name} left behind"
        );
    }
}

/// A PostgreSQL restart while a run is in flight: the run's end cannot be journaled until
/// the database is back, and the runtime retries it (`run::journal_end`) rather than giving
/// the run up, so every acknowledged run still gets exactly one terminal event. Kept apart
/// from the other kinds because it restarts the database every trial shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_keeps_the_journal_invariants() {
    assert!(is_root(), "the chaos test needs root (CI runs as root)");
    let tmp = tempfile::tempdir().unwrap();
    let cluster = start_cluster(tmp.path()).await;
    let report = chaos(&cluster, vec![FaultKind::PostgresRestart], 2).await;
    assert_clean(&report, 2);
    drop(cluster);
}
