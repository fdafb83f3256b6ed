//! Launches a real Redis (Debian's `redis-server`, 7.0+) on a free loopback port for tests.
//!
//! Each [`RedisServer`] runs in its own temporary directory with persistence switched off,
//! so tests run in parallel and a [`RedisServer::restart`] comes back empty, exactly as
//! Redis does after a crash in the cluster profile (docs/design.md#redis: Redis holds only
//! what may be lost). [`RedisServer::start_with_binds`] adds listen addresses beside
//! 127.0.0.1, for fault tests that reach it from a network namespace they created.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// How long a freshly spawned server may take to answer PING.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at finding a port: another process may grab the one we picked before Redis binds it.
const PORT_ATTEMPTS: usize = 5;

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A `redis-server` child process bound to `127.0.0.1:port`; killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    /// Listen addresses besides 127.0.0.1.
    extra_binds: Vec<IpAddr>,
    dir: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts `redis-server` (from `PATH`) on a free loopback port in a fresh temporary
    /// directory and waits until it answers PING. In the quick loop ([`crate::quick_mode`])
    /// it fails at once, naming Redis.
    pub fn start() -> anyhow::Result<RedisServer> {
        Self::start_with_binds(&[])
    }

    /// Like [`RedisServer::start`], also listening on `extra_binds` (addresses of this
    /// machine's namespace, such as the host end of a veth pair a test created).
    pub fn start_with_binds(extra_binds: &[IpAddr]) -> anyhow::Result<RedisServer> {
        crate::refuse_in_quick_mode("Redis (redis-server)")?;
        let dir = std::env::temp_dir().join(format!(
            "lumina-redis-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating redis directory {}", dir.display()))?;
        let mut server = RedisServer {
            port: 0,
            extra_binds: extra_binds.to_vec(),
            dir,
            child: None,
        };
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port()?;
            match server.spawn_on(port) {
                Ok(()) => return Ok(server),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("redis-server did not start")))
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The loopback port the server listens on (kept across [`RedisServer::restart`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the server process is currently running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(None)))
    }

    /// Kills the server (SIGKILL, like a crash). The port stays reserved for [`restart`].
    ///
    /// [`restart`]: RedisServer::restart
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server if it runs and starts a new one on the same port with no data, as
    /// after a crash of a Redis without persistence.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        // The old listener is gone once the process is reaped, but retry briefly in case the
        // kernel has not released the port yet.
        loop {
            match self.spawn_on(self.port) {
                Ok(()) => return Ok(()),
                Err(err) if Instant::now() >= deadline => return Err(err),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn spawn_on(&mut self, port: u16) -> anyhow::Result<()> {
        let log = self.dir.join("redis.log");
        let mut command = Command::new("redis-server");
        command
            .args(["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"])
            .args(self.extra_binds.iter().map(IpAddr::to_string));
        if !self.extra_binds.is_empty() {
            // Protected mode refuses every non-loopback client of a server without a
            // password; the extra addresses are there to be reached.
            command.args(["--protected-mode", "no"]);
        }
        let mut child = command
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning redis-server (is it on PATH?)")?;
        match wait_for_ping(&mut child, port) {
            Ok(()) => {
                self.port = port;
                self.child = Some(child);
                Ok(())
            }
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(err.context(format!("redis-server on port {port}; log: {}", tail(&log))))
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Asks the kernel for a free port. Another process can take it before Redis binds it, which
/// [`RedisServer::start`] handles by retrying with a new port.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a probe port")?;
    Ok(listener.local_addr()?.port())
}

fn wait_for_ping(child: &mut Child, port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("redis-server exited with {status}");
        }
        if ping(addr).unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("redis-server did not answer PING within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One PING over plain RESP; true on `+PONG`.
fn ping(addr: SocketAddr) -> std::io::Result<bool> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(b"PING\r\n")?;
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf)?;
    Ok(&buf == b"+PONG\r\n")
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(port: u16, cmd: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        stream.write_all(cmd.as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let n = stream.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn starts_restarts_empty_on_the_same_port_and_stops() {
        let mut server = RedisServer::start().unwrap();
        let port = server.port();
        assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));
        assert_eq!(command(port, "SET k v\r\n"), "+OK\r\n");
        assert_eq!(command(port, "GET k\r\n"), "$1\r\nv\r\n");

        server.restart().unwrap();
        assert_eq!(server.port(), port);
        assert_eq!(command(port, "GET k\r\n"), "$-1\r\n");

        server.stop();
        assert!(!server.is_running());
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    }
}
