//! A run that meets an MCP server waiting for a person to sign in (OAuth authorization
//! code flow, started by the manager's first connect) waits for that sign-in before its
//! step goes on, so the model is offered the server's tools once the person signed in.
//!
//! Each such server is journaled as `mcp.sign_in_required {server, url}` on the run's
//! stream, and `mcp.sign_in_ended {server, outcome}` when its sign-in ends — signed in,
//! timed out (the manager's `auth_timeout`, 5 min) or failed — each as it happens. A run
//! waits at most once per server (a sign-in that timed out is not waited for again in the
//! same run: the run goes on without the server's tools, as it always did). Interrupting
//! the run stops the wait (the run's end closes the open sign-ins; the flow itself goes on
//! in the background and the server reconnects when it completes).
//!
//! Headless runs (`lumina -p`) and sub-agents do not wait: the server's tools are missing
//! from the step, and the manager logs the URL, as before. The A2A executor maps an open
//! sign-in to `TASK_STATE_AUTH_REQUIRED` (docs/a2a.md).

use std::collections::HashSet;

use futures::stream::{FuturesUnordered, StreamExt};
use lumina_mcp::{McpManager, PendingSignIn, SignInEnd};
use lumina_protocol::{Event, SignInOutcome};

use crate::run::RunContext;
use crate::Result;

/// Characters of a failure's reason kept in `mcp.sign_in_ended`.
const DETAIL_KEEP: usize = 300;

/// The servers a run already waited for (`Session`'s state; one active run per session).
#[derive(Default)]
pub(crate) struct Waited {
    run_id: String,
    servers: HashSet<String>,
}

/// After a step listed the MCP tools: waits for the sign-ins that appeared, journaling
/// their start and end. `true` when a server was signed in (its tools should be listed
/// again).
pub(crate) async fn wait_for_sign_ins(ctx: &RunContext, manager: &McpManager) -> Result<bool> {
    if ctx.headless || !ctx.is_main() {
        return Ok(false);
    }
    let root = ctx.session.project_root();
    let fresh = fresh(ctx, manager.pending_sign_ins(root));
    if fresh.is_empty() {
        return Ok(false);
    }
    ctx.append(
        fresh
            .iter()
            .map(|p| Event::McpSignInRequired {
                run_id: ctx.run_id.clone(),
                server: p.server.clone(),
                url: p.url.clone(),
            })
            .collect(),
    )
    .await?;
    let mut waits: FuturesUnordered<_> = fresh
        .iter()
        .map(|p| async move {
            (
                p.server.clone(),
                manager.wait_sign_in(root, &p.server).await,
            )
        })
        .collect();
    let mut signed_in = false;
    loop {
        let next = tokio::select! {
            next = waits.next() => next,
            _ = ctx.cancel.cancelled() => return Ok(signed_in),
        };
        let Some((server, end)) = next else {
            return Ok(signed_in);
        };
        let (outcome, detail) = match end {
            SignInEnd::SignedIn => (SignInOutcome::SignedIn, String::new()),
            SignInEnd::TimedOut => (SignInOutcome::TimedOut, String::new()),
            SignInEnd::Failed(why) => (
                SignInOutcome::Failed,
                why.chars().take(DETAIL_KEEP).collect(),
            ),
        };
        signed_in |= outcome == SignInOutcome::SignedIn;
        ctx.append(vec![Event::McpSignInEnded {
            run_id: ctx.run_id.clone(),
            server,
            outcome,
            detail,
        }])
        .await?;
    }
}

/// The pending sign-ins this run has not waited for yet, now marked as waited for.
fn fresh(ctx: &RunContext, pending: Vec<PendingSignIn>) -> Vec<PendingSignIn> {
    let mut state = ctx.session.lock();
    let waited = &mut state.mcp_sign_ins_waited;
    if waited.run_id != ctx.run_id {
        *waited = Waited {
            run_id: ctx.run_id.clone(),
            servers: HashSet::new(),
        };
    }
    pending
        .into_iter()
        .filter(|p| waited.servers.insert(p.server.clone()))
        .collect()
}
