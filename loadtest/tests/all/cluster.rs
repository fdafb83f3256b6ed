//! `failover` against a real two-instance cluster: PostgreSQL and Redis from the test kit,
//! `lumina-backend cluster serve` processes started the way the load generator restarts
//! them (an instances file with env files and pid files, like `scripts/local-cluster`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use lumina_loadtest::instances::{self, Instance, Instances, InstancesAuth, Restart};
use lumina_loadtest::{
    AuthOptions, Common, Config, FailoverOptions, Scenario, SteadyOptions, TargetOptions,
};
use lumina_testkit::postgres::PgServer;
use lumina_testkit::redis::RedisServer;

use crate::support::{backend_bin, free_port, kill_pid_file, scripted_model};

const TENANT: &str = "t1";

/// Stops the instances named by the pid files, whoever started them last, and reaps the
/// ones this test started.
struct PidFiles(Vec<PathBuf>, Vec<std::process::Child>);

impl Drop for PidFiles {
    fn drop(&mut self) {
        for file in &self.0 {
            kill_pid_file(file);
        }
        for child in &mut self.1 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn write_env(path: &PathBuf, vars: &BTreeMap<String, String>) {
    let text: String = vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_trials_against_a_real_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let pg = PgServer::start().unwrap();
    let db_url = pg.create_unique_database("loadtest").unwrap();
    let redis = RedisServer::start().unwrap();
    let model = scripted_model(0);
    let app = tmp.path().join("app");
    let key_dir = app.join("config/cluster");
    lumina_auth::init_local(
        &key_dir,
        TENANT,
        "lumina-test",
        "lumina",
        Duration::from_secs(3600),
    )
    .unwrap();
    let project = tmp.path().join("workspace");
    std::fs::create_dir_all(&project).unwrap();
    let mut env = BTreeMap::new();
    for (k, v) in [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", tmp.path().display().to_string()),
        ("LUMINA_HOME", app.display().to_string()),
        ("LUMINA_POSTGRES_URL", db_url),
        ("LUMINA_REDIS_URL", redis.url()),
        (
            "LUMINA_CLUSTER_ID",
            format!("lt-{}", uuid::Uuid::new_v4().simple()),
        ),
        ("LUMINA_JWT_ISSUER", "lumina-test".into()),
        ("LUMINA_JWT_AUDIENCE", "lumina".into()),
        (
            "LUMINA_JWT_JWKS_FILE",
            key_dir.join("jwks.json").display().to_string(),
        ),
        ("LUMINA_CLUSTER_LEASE_TTL_MS", "1000".into()),
        ("LUMINA_CLUSTER_DRAIN_TIMEOUT_MS", "5000".into()),
        ("LUMINA_API_KEY", "cluster-test-key".into()),
        ("LUMINA_API_BASE_URL", model.base_url()),
        ("LUMINA_API_MODEL", "scripted".into()),
        ("LUMINA_API_TYPE", "anthropic".into()),
        ("LUMINA_PERMISSION_MODE", "bypass".into()),
    ] {
        env.insert(k.to_string(), v);
    }
    let migrate = std::process::Command::new(backend_bin())
        .arg("migrate")
        .env_clear()
        .envs(&env)
        .output()
        .unwrap();
    assert!(
        migrate.status.success(),
        "migrate: {}",
        String::from_utf8_lossy(&migrate.stderr)
    );

    let mut list = Vec::new();
    let mut pid_files = PidFiles(Vec::new(), Vec::new());
    for i in 0..2 {
        let id = format!("i{i}");
        let port = free_port();
        let mut vars = env.clone();
        vars.insert("LUMINA_INSTANCE_ID".into(), id.clone());
        vars.insert(
            "LUMINA_CLUSTER_LISTEN_ADDR".into(),
            format!("127.0.0.1:{port}"),
        );
        let env_file = tmp.path().join(format!("{id}.env"));
        write_env(&env_file, &vars);
        let pid_file = tmp.path().join(format!("{id}.pid"));
        pid_files.0.push(pid_file.clone());
        let mut instance = Instance {
            id: id.clone(),
            ws_url: format!("ws://127.0.0.1:{port}/v1/ws"),
            http_url: format!("http://127.0.0.1:{port}"),
            pid: 0,
            pid_file: Some(pid_file),
            restart: Some(Restart {
                argv: vec![
                    backend_bin().display().to_string(),
                    "cluster".into(),
                    "serve".into(),
                ],
                env_file: Some(env_file),
                cwd: Some(project.clone()),
                log: Some(tmp.path().join(format!("{id}.log"))),
            }),
            netns: None,
            faketime: None,
        };
        // The same start path the failover scenario uses for restarts.
        let child = instances::restart(&instance).unwrap();
        instance.pid = child.id();
        pid_files.1.push(child);
        list.push(instance);
    }
    for instance in &list {
        let base = url::Url::parse(&instance.http_url).unwrap();
        if let Err(e) = instances::wait_ready(&base, Duration::from_secs(60)).await {
            let log = std::fs::read_to_string(tmp.path().join(format!("{}.log", instance.id)));
            panic!("{e}: {}", log.unwrap_or_default());
        }
    }
    let file = Instances {
        version: 1,
        cluster_id: None,
        auth: Some(InstancesAuth {
            signing_key_dir: key_dir.clone(),
            tenant: TENANT.into(),
        }),
        services: None,
        instances: list,
    };
    let instances_path = tmp.path().join("instances.json");
    std::fs::write(
        &instances_path,
        serde_json::to_string_pretty(&file).unwrap(),
    )
    .unwrap();

    let target = TargetOptions {
        instances_file: Some(instances_path),
        auth: AuthOptions::auto(),
        ..TargetOptions::default()
    };
    let common = Common {
        project_root: Some(project.display().to_string()),
        call_timeout_secs: 20.0,
        run_timeout_secs: 30.0,
        ..Common::default()
    };
    // A short steady run across both gateways first: the observer sits on the other one.
    let steady = lumina_loadtest::run(&Config {
        target: target.clone(),
        common: common.clone(),
        scenario: Scenario::Steady(SteadyOptions {
            sessions: 2,
            rate_per_session: 2.0,
            duration_secs: 2.0,
            max_in_flight: 4,
            observers: true,
            start_at_unix_secs: None,
        }),
        progress: false,
    })
    .await
    .unwrap();
    eprintln!("{}", steady.text_summary());
    assert!(steady.ok, "{steady:#?}");
    assert!(
        steady.target.auth.starts_with("minted"),
        "{}",
        steady.target.auth
    );

    let report = lumina_loadtest::run(&Config {
        target,
        common,
        scenario: Scenario::Failover(FailoverOptions {
            trials: 2,
            submit_timeout_secs: 30.0,
            ready_timeout_secs: 60.0,
            max_duration_secs: 300.0,
        }),
        progress: false,
    })
    .await
    .unwrap();
    eprintln!("{}", report.text_summary());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.violation_count, 0, "{:?}", report.violations);
    let failover = report.failover.as_ref().unwrap();
    assert_eq!(failover.trials_run, 2, "{failover:#?}");
    assert_eq!(failover.trials_ok, 2, "{failover:#?}");
    for trial in &failover.trials {
        assert_ne!(trial.new_owner.as_deref(), Some(trial.killed.as_str()));
        assert_ne!(trial.submitted_via, trial.killed);
        assert!(trial.ack_ms.is_some() && trial.completion_ms.is_some());
        assert!(trial.restart_ready_ms.is_some());
    }
    for metric in [
        "submit_ack",
        "submit_first_event",
        "submit_completion",
        "kill_to_ack",
        "restart_ready",
    ] {
        assert_eq!(report.metrics[metric].count, 2, "{metric}");
    }
    assert!(report.ok);
    let dir = tempfile::tempdir().unwrap();
    let (_, html) = report.write(dir.path()).unwrap();
    assert!(std::fs::read_to_string(html).unwrap().contains("Failover"));
    drop(pid_files);
}
