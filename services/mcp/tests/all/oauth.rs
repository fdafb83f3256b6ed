//! OAuth against the in-test server ([`FakeOAuth`]): the library flow with the headless
//! agent (refresh, then re-authorization after revocation; the legacy HTTP+SSE transport;
//! pre-registered clients), and
//! the manager: interactive sign-in through the loopback listener, tokens that survive a
//! restart (and are refreshed), and headless managers that cannot ask.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use lumina_config::Secret;
use lumina_mcp::client::auth::{HeadlessAgent, OAuth, OAuthConfig, PreRegistered, TokenStore};
use lumina_mcp::client::{ClientSession, ConnectOptions, Endpoint, HttpMode, TransportKind};
use lumina_mcp::{ManagerOptions, McpManager, ServerState};
use pretty_assertions::assert_eq;
use serde_json::json;
use url::Url;

use crate::fake_oauth::{Counts, FakeOAuth};
use crate::support::{self, Env};

async fn echo(session: &ClientSession, message: &str) -> Result<String> {
    let r = session
        .call_tool(
            "echo",
            json!({"message": message}),
            Duration::from_secs(30),
            None,
        )
        .await?;
    Ok(lumina_mcp::result_text(&r))
}

fn headless(url: &Url, client: Option<PreRegistered>) -> Result<Arc<OAuth>> {
    let mut cfg = OAuthConfig::new(url.clone(), "fake");
    cfg.client = client;
    Ok(OAuth::new(
        cfg,
        Some(Arc::new(HeadlessAgent::new()?)),
        None,
    )?)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_is_refreshed_then_reauthorized() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let url = Url::parse(&fake.mcp_url())?;
    let auth = headless(&url, None)?;
    let opts = ConnectOptions {
        auth: Some(auth.clone()),
        ..ConnectOptions::default()
    };
    let session = ClientSession::connect(&Endpoint::http(url, HttpMode::Auto), &opts).await?;
    assert_eq!(echo(&session, "one").await?, "echo: one");
    let first = Counts {
        registrations: 1,
        authorizations: 1,
        code_grants: 1,
        refresh_grants: 0,
        unauthorized: 1,
    };
    assert_eq!(fake.counts(), first);

    // The access token stops working: one refresh, no new sign-in.
    fake.revoke(false);
    assert_eq!(echo(&session, "two").await?, "echo: two");
    let c = fake.counts();
    assert_eq!(
        (c.refresh_grants, c.authorizations, c.unauthorized),
        (1, 1, 2)
    );

    // The refresh token too: authorize again, reusing the registration.
    fake.revoke(true);
    assert_eq!(echo(&session, "three").await?, "echo: three");
    let c = fake.counts();
    assert_eq!(
        (c.refresh_grants, c.authorizations, c.registrations),
        (2, 2, 1)
    );

    let shown = format!("{auth:?} {opts:?} {:?}", session.info());
    for token in fake.issued() {
        assert!(!shown.contains(&token), "{shown}");
    }
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_legacy_sse_transport_authorizes_too() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let url = Url::parse(&fake.sse_url())?;
    let opts = ConnectOptions {
        auth: Some(headless(&url, None)?),
        ..ConnectOptions::default()
    };
    let endpoint = Endpoint::http(url, HttpMode::LegacySse);
    let session = ClientSession::connect(&endpoint, &opts).await?;
    assert_eq!(session.info().transport, TransportKind::Sse);
    assert_eq!(echo(&session, "old").await?, "echo: old");
    // A revoked token on a POST: refreshed, and the message sent again.
    fake.revoke(false);
    assert_eq!(echo(&session, "older").await?, "echo: older");
    let c = fake.counts();
    assert_eq!(
        (c.authorizations, c.refresh_grants, c.unauthorized),
        (1, 1, 2)
    );
    session.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn pre_registered_clients_do_not_register() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let url = Url::parse(&fake.mcp_url())?;
    let client = PreRegistered {
        client_id: "configured".into(),
        client_secret: Some(Secret::new("configured-secret")),
        signing_key: None,
    };
    let auth = headless(&url, Some(client))?;
    let opts = ConnectOptions {
        auth: Some(auth.clone()),
        ..ConnectOptions::default()
    };
    let session = ClientSession::connect(&Endpoint::http(url, HttpMode::Auto), &opts).await?;
    assert_eq!(echo(&session, "x").await?, "echo: x");
    assert_eq!(
        (fake.counts().registrations, fake.counts().code_grants),
        (0, 1)
    );
    assert!(!format!("{auth:?}").contains("configured-secret"));
    session.close().await;
    Ok(())
}

/// The URL at the end of a "needs authorization: open … : <url>" reason.
fn sign_in_url(state: &ServerState) -> Result<String> {
    let ServerState::Failed(reason) = state else {
        bail!("expected a failed state, got {state:?}");
    };
    if !reason.starts_with("needs authorization: open this URL in a browser") {
        bail!("unexpected reason: {reason}");
    }
    Ok(reason.rsplit(": ").next().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn interactive_sign_in_then_stored_tokens_survive_a_restart() -> Result<()> {
    // Three-second tokens: the restart below, later than that, must refresh.
    let fake = FakeOAuth::start(3).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {"url": fake.mcp_url()}}}))?;
    let manager = env.manager();
    assert!(manager.tools(&env.project).await.is_empty());
    let status = support::status_of(&manager, &env.project, "remote").await?;
    let url = sign_in_url(&status.state)?;
    assert!(
        url.starts_with(&format!("{}/authorize?", fake.base)),
        "{url}"
    );
    // While the person has not signed in, using the server starts no second sign-in.
    assert!(manager.tools(&env.project).await.is_empty());
    let again = support::status_of(&manager, &env.project, "remote").await?;
    assert_eq!(sign_in_url(&again.state)?, url);
    assert_eq!(fake.counts().registrations, 1);

    // The person opens the URL; the browser follows the redirect to the loopback listener.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let resp = browser.get(&url).send().await?;
    assert_eq!(resp.status().as_u16(), 302);
    let callback = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .context("no Location")?
        .to_string();
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let page = browser.get(&callback).send().await?;
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await?.contains("Signed in"));

    // The slot reconnects by itself once the code is exchanged.
    let status = support::wait_for_state(&manager, &env.project, "remote", |s| {
        *s == ServerState::Connected
    })
    .await?;
    assert_eq!(status.tools, ["mcp__remote__echo"]);
    let tools = manager.tools(&env.project).await;
    let out = support::find_tool(&tools, "mcp__remote__echo")?
        .call(&env.ctx(), json!({"message": "hi"}))
        .await;
    assert_eq!((out.content.as_str(), out.is_error), ("echo: hi", false));

    let store = TokenStore::for_server(&env.app_root, &Url::parse(&fake.mcp_url())?);
    assert!(store.load().tokens.is_some());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.path())?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let shown = format!("{:?}", manager.status(&env.project).await);
    for token in fake.issued() {
        assert!(!shown.contains(&token), "{shown}");
    }
    manager.shutdown().await;

    // A restart that cannot ask anyone: the stored (refreshed) tokens are enough.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let headless = McpManager::new(ManagerOptions {
        interactive_auth: false,
        ..ManagerOptions::new(env.app_root.clone())
    });
    let tools = headless.tools(&env.project).await;
    support::find_tool(&tools, "mcp__remote__echo")?;
    let c = fake.counts();
    assert_eq!((c.registrations, c.authorizations), (1, 1));
    assert!(c.refresh_grants >= 1, "{c:?}");
    headless.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_headless_manager_reports_needs_authorization() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {"url": fake.mcp_url()}}}))?;
    let manager = McpManager::new(ManagerOptions {
        interactive_auth: false,
        ..ManagerOptions::new(env.app_root.clone())
    });
    assert!(manager.tools(&env.project).await.is_empty());
    let status = support::status_of(&manager, &env.project, "remote").await?;
    let ServerState::Failed(reason) = &status.state else {
        bail!("expected failed, got {:?}", status.state);
    };
    assert!(
        reason.starts_with("needs authorization: `remote` requires signing in (OAuth)"),
        "{reason}"
    );
    assert_eq!(fake.counts().authorizations, 0);
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_abandoned_sign_in_is_reported_and_restarted_only_on_use() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {"url": fake.mcp_url()}}}))?;
    let manager = McpManager::new(ManagerOptions {
        auth_timeout: Duration::from_secs(1),
        ..ManagerOptions::new(env.app_root.clone())
    });
    assert!(manager.tools(&env.project).await.is_empty());
    let first = sign_in_url(
        &support::status_of(&manager, &env.project, "remote")
            .await?
            .state,
    )?;
    let gave_up = |s: &ServerState| matches!(s, ServerState::Failed(r) if r.contains("nobody completed the sign-in"));
    support::wait_for_state(&manager, &env.project, "remote", gave_up).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = support::status_of(&manager, &env.project, "remote").await?;
    assert!(gave_up(&still.state), "{:?}", still.state);

    // The next use asks again, with a new request.
    assert!(manager.tools(&env.project).await.is_empty());
    let second = sign_in_url(
        &support::status_of(&manager, &env.project, "remote")
            .await?
            .state,
    )?;
    assert_ne!(first, second);
    assert_eq!(fake.counts().authorizations, 0);
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_sign_in_is_listed_and_its_end_waited_for() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {"url": fake.mcp_url()}}}))?;
    let manager = McpManager::new(ManagerOptions::new(env.app_root.clone()));
    assert!(manager.pending_sign_ins(&env.project).is_empty());
    assert!(manager.tools(&env.project).await.is_empty());
    let pending = manager.pending_sign_ins(&env.project);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].server, "remote");
    assert!(
        pending[0]
            .url
            .starts_with(&format!("{}/authorize?", fake.base)),
        "{pending:?}"
    );
    let waiter = {
        let (manager, project) = (manager.clone(), env.project.clone());
        tokio::spawn(async move { manager.wait_sign_in(&project, "remote").await })
    };
    // A person's browser: the authorization page redirects to the loopback listener.
    let page = reqwest::get(&pending[0].url).await?.text().await?;
    assert!(page.contains("Signed in"), "{page}");
    let end = tokio::time::timeout(Duration::from_secs(20), waiter).await??;
    assert_eq!(end, lumina_mcp::SignInEnd::SignedIn);
    assert!(manager.pending_sign_ins(&env.project).is_empty());
    let tools = manager.tools(&env.project).await;
    support::find_tool(&tools, "mcp__remote__echo")?;
    // Nothing to wait for any more: it ends at once.
    assert_eq!(
        manager.wait_sign_in(&env.project, "remote").await,
        lumina_mcp::SignInEnd::SignedIn
    );
    manager.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sign_in_nobody_completes_ends_timed_out() -> Result<()> {
    let fake = FakeOAuth::start(3600).await?;
    let env = Env::new()?;
    env.write_user_config(&json!({"mcpServers": {"remote": {"url": fake.mcp_url()}}}))?;
    let manager = McpManager::new(ManagerOptions {
        auth_timeout: Duration::from_secs(1),
        ..ManagerOptions::new(env.app_root.clone())
    });
    assert!(manager.tools(&env.project).await.is_empty());
    assert_eq!(manager.pending_sign_ins(&env.project).len(), 1);
    let end = tokio::time::timeout(
        Duration::from_secs(20),
        manager.wait_sign_in(&env.project, "remote"),
    )
    .await?;
    assert_eq!(end, lumina_mcp::SignInEnd::TimedOut);
    assert!(manager.pending_sign_ins(&env.project).is_empty());
    assert_eq!(
        manager.wait_sign_in(&env.project, "nope").await,
        lumina_mcp::SignInEnd::Failed("`nope` has no sign-in under way".into())
    );
    manager.shutdown().await;
    Ok(())
}
