//! The end-of-run check of a scenario's sessions: every client must have applied exactly
//! the journal (nothing lost, nothing twice, in order), every acknowledged run must be in
//! the journal — one `run.started` and one terminal event, or queued as a follow-up and
//! cancelled before it started; one still queued or running when the drain ends is counted
//! as unfinished, not as a violation — and the two clients of a session give the fan-out
//! lag. Sessions are checked concurrently under one overall deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use lumina_client::protocol::SessionStatus;

use super::{Ctx, Slot};
use crate::error::error_kind;
use crate::metrics;
use crate::progress::Progress;
use crate::report::VerificationSummary;
use crate::track::{RunShape, Tracked};

/// How long clients may take to receive the journal's head once the load has stopped.
const CATCH_UP: Duration = Duration::from_secs(10);

/// How long the sessions' last runs (queued follow-ups included) may take to end once the
/// load has stopped. A run still open after it is counted as unfinished, apart from the
/// violations: it is slow, not wrong (the journal checks still hold for what it wrote).
const DRAIN: Duration = Duration::from_secs(60);

/// Between two looks at a draining session.
const DRAIN_POLL: Duration = Duration::from_millis(200);

/// Sessions verified at once.
const CONCURRENCY: usize = 16;

fn add(total: &mut VerificationSummary, part: &VerificationSummary) {
    total.clients += part.clients;
    total.events_checked += part.events_checked;
    total.lost += part.lost;
    total.duplicated += part.duplicated;
    total.out_of_order += part.out_of_order;
    total.mismatched += part.mismatched;
    total.runs_submitted += part.runs_submitted;
    total.runs_well_formed += part.runs_well_formed;
    total.runs_malformed += part.runs_malformed;
    total.runs_unfinished += part.runs_unfinished;
    total.wire_duplicates += part.wire_duplicates;
    total.gaps_backfilled += part.gaps_backfilled;
}

/// Verifies every slot; problems are recorded as violations (or errors when the check
/// itself could not be made).
pub(crate) async fn verify_slots(ctx: &Ctx, slots: &[Arc<Slot>]) -> VerificationSummary {
    let progress = Progress::new(ctx.progress, slots.len() as u64, "verify");
    let drained_by = Instant::now() + DRAIN;
    let parts: Vec<VerificationSummary> = futures::stream::iter(slots)
        .map(|slot| {
            let progress = progress.clone();
            async move {
                drain(ctx, slot, drained_by).await;
                let part = verify_slot(ctx, slot, Instant::now() + CATCH_UP).await;
                progress.inc(1);
                part
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    progress.finish();
    let mut summary = VerificationSummary {
        sessions: slots.len() as u64,
        ..VerificationSummary::default()
    };
    for part in &parts {
        add(&mut summary, part);
    }
    summary
}

/// Waits until the session has no run open or queued, or `deadline`.
async fn drain(ctx: &Ctx, slot: &Slot, deadline: Instant) {
    let Some(client) = slot.tracked.client() else {
        return;
    };
    let session = &slot.tracked.session_id;
    while Instant::now() < deadline {
        match client.session_info(session).await {
            Ok(info) if info.session.status != SessionStatus::Running => return,
            Ok(_) => tokio::time::sleep(DRAIN_POLL).await,
            Err(error) => {
                ctx.metrics.error(&format!("drain:{}", error_kind(&error)));
                return;
            }
        }
    }
}

async fn verify_slot(ctx: &Ctx, slot: &Slot, deadline: Instant) -> VerificationSummary {
    let mut summary = VerificationSummary::default();
    let session = &slot.tracked.session_id;
    let Some(client) = slot.tracked.client() else {
        ctx.metrics.violation(format!(
            "session {session}: no connection left to verify with"
        ));
        return summary;
    };
    let head = match client.session_events(session, 0, Some(1)).await {
        Ok(page) => page.head_seq,
        Err(error) => {
            ctx.metrics.error(&format!("verify:{}", error_kind(&error)));
            return summary;
        }
    };
    let clients: Vec<&Arc<Tracked>> = std::iter::once(&slot.tracked)
        .chain(slot.observer.as_ref())
        .collect();
    for tracked in &clients {
        if !tracked.wait_seq(head, deadline).await {
            ctx.metrics.violation(format!(
                "session {session}: a client did not receive events up to seq {head} in time"
            ));
        }
    }
    let submitted = slot.runs();
    summary.runs_submitted = submitted.len() as u64;
    for (k, tracked) in clients.iter().enumerate() {
        let verification = match tracked.verify(&client).await {
            Ok(v) => v,
            Err(error) => {
                ctx.metrics.error(&format!("verify:{}", error_kind(&error)));
                continue;
            }
        };
        summary.clients += 1;
        summary.events_checked += verification.events;
        summary.lost += verification.lost;
        summary.duplicated += verification.duplicated;
        summary.out_of_order += verification.out_of_order;
        summary.mismatched += verification.mismatched;
        let (dups, gaps) = tracked.wire_stats().await;
        summary.wire_duplicates += dups;
        summary.gaps_backfilled += gaps;
        for problem in verification.problems {
            ctx.metrics
                .violation(format!("session {session}: {problem}"));
        }
        // The runs are checked once per session, against the journal the primary read.
        if k > 0 {
            continue;
        }
        for run in &submitted {
            match verification.runs.get(run) {
                Some(events) => match events.shape() {
                    RunShape::WellFormed => summary.runs_well_formed += 1,
                    // Still queued or running after the drain: reported, not a violation.
                    RunShape::Unfinished => summary.runs_unfinished += 1,
                    RunShape::Malformed => {
                        summary.runs_malformed += 1;
                        ctx.metrics.violation(format!(
                            "run {run}: {} run.queued, {} run.started and {} terminal events",
                            events.queued, events.started, events.ended
                        ));
                    }
                },
                None => {
                    summary.runs_malformed += 1;
                    ctx.metrics
                        .violation(format!("run {run} is not in the journal"));
                }
            }
        }
    }
    if let Some(observer) = &slot.observer {
        let a = slot.tracked.arrivals().await;
        let b = observer.arrivals().await;
        let mut m = ctx.metrics.lock();
        for (seq, at) in &a {
            if let Some(other) = b.get(seq) {
                let lag = if other > at {
                    *other - *at
                } else {
                    *at - *other
                };
                m.record(metrics::FANOUT_LAG, lag);
            }
        }
    }
    summary
}
