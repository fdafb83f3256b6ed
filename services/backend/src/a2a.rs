//! `lumina-backend a2a …`: the A2A surface's commands. `tck-fixture` serves the production
//! A2A router and service (`lumina-a2a`) with the TCK fixture executor in place of the agent
//! runtime, for the official conformance suite; `card` prints the Agent Card. See
//! docs/a2a.md.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Subcommand)]
pub enum A2aCommand {
    /// Serve the A2A server with the TCK fixture executor (JSON-RPC at /, the card at
    /// /.well-known/agent-card.json) until Ctrl-C. In-memory tasks; loopback webhooks allowed.
    TckFixture {
        /// Address to listen on; the bound address is printed first.
        #[arg(long, default_value = "127.0.0.1:9999")]
        listen: SocketAddr,
        /// The URL the card advertises (default: http://<bound address>).
        #[arg(long)]
        public_url: Option<String>,
    },
    /// Print the Agent Card this backend serves (as JSON).
    Card {
        /// The URL the card advertises (default: $LUMINA_A2A_PUBLIC_URL, else the local
        /// listener's http://127.0.0.1:<port>/a2a).
        #[arg(long, env = "LUMINA_A2A_PUBLIC_URL")]
        public_url: Option<String>,
    },
}

pub async fn run(command: A2aCommand) -> anyhow::Result<()> {
    match command {
        A2aCommand::TckFixture { listen, public_url } => {
            let listener = tokio::net::TcpListener::bind(listen).await?;
            println!("{}", listener.local_addr()?);
            let shutdown = CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let _ = tokio::signal::ctrl_c().await;
                stop.cancel();
            });
            lumina_a2a::fixture::serve(listener, public_url, shutdown).await?;
            Ok(())
        }
        A2aCommand::Card { public_url } => {
            let url = public_url.unwrap_or_else(|| "http://127.0.0.1:0/a2a".to_owned());
            let card = card_document(&url, None);
            println!("{}", String::from_utf8_lossy(&card.body));
            Ok(())
        }
    }
}

/// The backend's card: the agent runtime's catalog at `url`.
pub fn card_document(url: &str, listen: Option<SocketAddr>) -> lumina_a2a::CardDocument {
    let options = lumina_a2a::CardOptions {
        name: "Lumina".into(),
        description: "Lumina agent runtime: coding and research agent sessions with tools, skills, memory and approvals".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        url: url.to_owned(),
        listen,
        url_setting: "LUMINA_A2A_PUBLIC_URL".into(),
        input_modes: vec!["text/plain".into(), "application/json".into()],
        output_modes: vec!["text/plain".into()],
        push_notifications: true,
        bearer_auth: true,
        streaming: true,
    };
    lumina_a2a::CardDocument::build(&options, catalog())
}

/// The capability catalog of the agent runtime as A2A skills.
pub fn catalog() -> Vec<lumina_a2a::AgentSkill> {
    vec![lumina_a2a::AgentSkill {
        id: "agent-run".into(),
        name: "Agent run".into(),
        description: "Runs one Lumina agent turn on the message in the context's session (a context is a session, a task is a run)".into(),
        tags: vec!["agent".into(), "coding".into(), "research".into()],
        examples: vec!["Summarise the README of this project".into()],
    }]
}
