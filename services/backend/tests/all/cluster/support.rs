//! A cluster of real `lumina-backend cluster serve` processes on loopback.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lumina_client::{Client, ClientError, Notifications};
use lumina_testkit::postgres::PgServer;
use lumina_testkit::redis::RedisServer;
use lumina_testkit::{ScriptedModelServer, Turn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const TENANT: &str = "t1";
pub const ISSUER: &str = "lumina-test";
pub const AUDIENCE: &str = "lumina";
/// Short leases keep failover tests quick.
pub const LEASE_TTL_MS: u64 = 3000;

pub struct Instance {
    pub id: String,
    pub port: u16,
    pub child: Option<Child>,
    pub log: PathBuf,
}

impl Instance {
    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/v1/ws", self.port)
    }
}

pub struct Cluster {
    pub tmp: tempfile::TempDir,
    pub pg: PgServer,
    pub redis: RedisServer,
    pub db_url: String,
    pub model: ScriptedModelServer,
    pub key_dir: PathBuf,
    pub project: PathBuf,
    pub cluster_id: String,
    pub instances: Vec<Instance>,
    /// Extra environment for every instance.
    pub extra_env: Vec<(String, String)>,
    /// Each instance calls the scripted model under its own path prefix (`/<instance id>/v1/…`),
    /// so the model's request log says which instance made each request.
    pub model_path_per_instance: bool,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    pub async fn start(n: usize, turns: Vec<Turn>) -> Cluster {
        Self::start_with_env(n, turns, Vec::new()).await
    }

    pub async fn start_with_env(
        n: usize,
        turns: Vec<Turn>,
        extra_env: Vec<(String, String)>,
    ) -> Cluster {
        Self::start_inner(n, turns, extra_env, false).await
    }

    /// Like [`Cluster::start_with_env`], with every model request attributed to the
    /// instance that made it (the recorded request's `path` starts with `/<instance id>/`).
    pub async fn start_attributed(
        n: usize,
        turns: Vec<Turn>,
        extra_env: Vec<(String, String)>,
    ) -> Cluster {
        Self::start_inner(n, turns, extra_env, true).await
    }

    async fn start_inner(
        n: usize,
        turns: Vec<Turn>,
        extra_env: Vec<(String, String)>,
        model_path_per_instance: bool,
    ) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let pg = PgServer::start().unwrap();
        let db_url = pg.create_unique_database("cluster").unwrap();
        let redis = RedisServer::start().unwrap();
        let model = ScriptedModelServer::start(turns).unwrap();
        let key_dir = tmp.path().join("app/config/cluster");
        lumina_auth::init_local(
            &key_dir,
            TENANT,
            ISSUER,
            AUDIENCE,
            Duration::from_secs(3600),
        )
        .unwrap();
        let project = tmp.path().join("workspace");
        std::fs::create_dir_all(&project).unwrap();
        let mut cluster = Cluster {
            tmp,
            pg,
            redis,
            db_url,
            model,
            key_dir,
            project,
            cluster_id: format!("test-{}", uuid::Uuid::new_v4().simple()),
            instances: Vec::new(),
            extra_env,
            model_path_per_instance,
        };
        let migrate = cluster.command(&["migrate"]).output().unwrap();
        assert!(
            migrate.status.success(),
            "migrate: {}",
            String::from_utf8_lossy(&migrate.stderr)
        );
        for i in 0..n {
            cluster.spawn(&format!("i{i}"), free_port());
        }
        for i in 0..n {
            cluster.wait_ready(i).await;
        }
        cluster
    }

    /// The backend binary with the cluster's settings in its environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lumina-backend"));
        cmd.args(args)
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path())
            .env("LUMINA_HOME", self.tmp.path().join("app"))
            .env("LUMINA_POSTGRES_URL", &self.db_url)
            .env("LUMINA_REDIS_URL", self.redis.url())
            .env("LUMINA_CLUSTER_ID", &self.cluster_id)
            .env("LUMINA_JWT_ISSUER", ISSUER)
            .env("LUMINA_JWT_AUDIENCE", AUDIENCE)
            .env("LUMINA_JWT_JWKS_FILE", self.key_dir.join("jwks.json"))
            .env("LUMINA_CLUSTER_LEASE_TTL_MS", LEASE_TTL_MS.to_string())
            .env("LUMINA_CLUSTER_DRAIN_TIMEOUT_MS", "5000")
            .env("LUMINA_API_KEY", "cluster-test-key")
            .env("LUMINA_API_BASE_URL", self.model.base_url())
            .env("LUMINA_API_MODEL", "scripted")
            .env("LUMINA_API_TYPE", "anthropic")
            .env("LUMINA_PERMISSION_MODE", "bypass")
            .env("LUMINA_LOG", "info,lumina_backend=debug")
            .envs(self.extra_env.iter().cloned())
            .stdin(Stdio::null());
        cmd
    }

    pub fn spawn(&mut self, id: &str, port: u16) {
        let log = self.tmp.path().join(format!("{id}.log"));
        let mut command = self.command(&["cluster", "serve"]);
        if self.model_path_per_instance {
            command.env(
                "LUMINA_API_BASE_URL",
                format!("{}/{id}", self.model.base_url().trim_end_matches('/')),
            );
        }
        let child = command
            .env("LUMINA_INSTANCE_ID", id)
            .env("LUMINA_CLUSTER_LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let instance = Instance {
            id: id.to_string(),
            port,
            child: Some(child),
            log,
        };
        match self.instances.iter_mut().find(|i| i.id == id) {
            Some(existing) => *existing = instance,
            None => self.instances.push(instance),
        }
    }

    pub async fn wait_ready(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if http_status(self.instances[i].port, "/readyz").await == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "instance {} not ready: {}",
                self.instances[i].id,
                self.log(i)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.instances[i].log).unwrap_or_default()
    }

    pub fn token(&self, sub: &str, tenant: &str, scopes: &[&str]) -> String {
        lumina_auth::mint(&self.key_dir, sub, tenant, scopes, Duration::from_secs(600)).unwrap()
    }

    pub fn user_token(&self) -> String {
        self.token(
            "alice",
            TENANT,
            &["lumina:session:read", "lumina:session:write"],
        )
    }

    pub async fn client(&self, i: usize, token: &str) -> (Client, Notifications) {
        Client::connect(&self.instances[i].url(), Some(token))
            .await
            .unwrap()
    }

    pub async fn try_client(
        &self,
        i: usize,
        token: &str,
    ) -> Result<(Client, Notifications), ClientError> {
        Client::connect(&self.instances[i].url(), Some(token)).await
    }

    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.instances[i].child.as_ref().unwrap().id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut child) = self.instances[i].child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Waits for instance `i` to exit; returns its status.
    pub fn wait_exit(&mut self, i: usize, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        let child = self.instances[i].child.as_mut().unwrap();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.instances[i].child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "instance did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The writer fence of every event of a session, in seq order.
    pub fn fences(&self, session_id: &str) -> Vec<u64> {
        self.sql(&format!(
            "select fence from events where session_id = '{session_id}' order by seq"
        ))
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
    }

    /// `SELECT` through psql, one row per line.
    pub fn sql(&self, query: &str) -> String {
        let db = self.db_url.rsplit('/').next().unwrap().to_string();
        self.pg.psql(&db, query).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for i in 0..self.instances.len() {
                eprintln!("---- log of {} ----\n{}", self.instances[i].id, self.log(i));
            }
        }
        for instance in &mut self.instances {
            if let Some(mut child) = instance.child.take() {
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A plain HTTP/1.1 GET on loopback; the status code, or `None` when nothing answers.
pub async fn http_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path).await.map(|(status, _)| status)
}

pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let fut = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.ok()?;
        let text = String::from_utf8_lossy(&response).into_owned();
        let status = text.split_whitespace().nth(1)?.parse().ok()?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .ok()
        .flatten()
}
