//! Fail-closed start-up: missing settings and unreachable dependencies stop the process with
//! a message naming the setting, never a secret, and never fall back to the local profile.

use std::process::Command;

use super::support::*;

fn run(mut cmd: Command) -> (i32, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_fails_closed() {
    let cluster = Cluster::start(0, vec![]).await;

    let mut bare = Command::new(env!("CARGO_BIN_EXE_lumina-backend"));
    bare.args(["cluster", "serve"])
        .env_clear()
        .env("HOME", cluster.tmp.path())
        .env("LUMINA_HOME", cluster.tmp.path().join("bare"));
    let (code, stderr) = run(bare);
    assert_ne!(code, 0);
    for setting in [
        "LUMINA_REDIS_URL",
        "LUMINA_POSTGRES_URL",
        "LUMINA_JWT_ISSUER",
        "LUMINA_INSTANCE_ID",
    ] {
        assert!(stderr.contains(setting), "{setting} not named in: {stderr}");
    }
    assert!(
        !std::path::Path::new(&cluster.tmp.path().join("bare/state/run/backend.json")).exists()
    );

    let mut no_redis = cluster.command(&["cluster", "serve"]);
    no_redis
        .env("LUMINA_INSTANCE_ID", "x")
        .env("LUMINA_CLUSTER_LISTEN_ADDR", "127.0.0.1:0")
        .env("LUMINA_REDIS_URL", "redis://:hunter2-secret@127.0.0.1:1/");
    let (code, stderr) = run(no_redis);
    assert_ne!(code, 0);
    assert!(stderr.contains("redis_url"), "{stderr}");
    assert!(!stderr.contains("hunter2-secret"), "{stderr}");

    let mut no_pg = cluster.command(&["cluster", "serve"]);
    no_pg
        .env("LUMINA_INSTANCE_ID", "x")
        .env("LUMINA_CLUSTER_LISTEN_ADDR", "127.0.0.1:0")
        .env(
            "LUMINA_POSTGRES_URL",
            "postgres://lumina:pg-secret-pw@127.0.0.1:1/lumina",
        );
    let (code, stderr) = run(no_pg);
    assert_ne!(code, 0);
    assert!(stderr.contains("postgres_url"), "{stderr}");
    assert!(!stderr.contains("pg-secret-pw"), "{stderr}");

    let mut bad_jwks = cluster.command(&["cluster", "serve"]);
    bad_jwks
        .env("LUMINA_INSTANCE_ID", "x")
        .env("LUMINA_CLUSTER_LISTEN_ADDR", "127.0.0.1:0")
        .env(
            "LUMINA_JWT_JWKS_FILE",
            cluster.tmp.path().join("missing-jwks.json"),
        );
    let (code, stderr) = run(bad_jwks);
    assert_ne!(code, 0);
    assert!(stderr.contains("jwks"), "{stderr}");
}
