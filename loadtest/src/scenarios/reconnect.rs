//! `reconnect-storm`: every session gets a run in flight, then all connections are dropped
//! at once, every client reconnects at once (to the next gateway URL), resumes with
//! `session.resume` after its last applied seq and backfills the gap through its
//! `SessionView` / `catch_up`; the run must then end, and at the end every client's applied
//! events must equal the journal: nothing lost, nothing applied twice.
//!
//! Runs are submitted with [`super::SLOW_MARKER`] in the prompt, so a scripted model that
//! has slow turns for it keeps them going across the reconnect; `runs_in_flight_at_kill`
//! tells how many were.

use std::time::{Duration, Instant, SystemTime};

use futures::future::join_all;
use serde::Serialize;

use super::{
    base_report, check_count, check_secs, close_slots, open_slots, secs, verify_slots, Ctx, Slot,
    MAX_SESSIONS, SLOW_MARKER,
};
use crate::error::{Error, Result};
use crate::metrics;
use crate::progress::Progress;
use crate::report::Report;
use crate::track::Terminal;

/// `reconnect-storm` options.
#[derive(Debug, Clone, Serialize)]
pub struct ReconnectOptions {
    pub sessions: usize,
    /// Rounds are started until this much time has passed (at least one round).
    pub duration_secs: f64,
    pub max_rounds: usize,
    /// Time between the runs' first events and dropping the connections.
    pub kill_after_ms: u64,
}

impl ReconnectOptions {
    fn validate(&self) -> Result<()> {
        check_count("--sessions", self.sessions, MAX_SESSIONS)?;
        check_secs("--duration", self.duration_secs)?;
        check_count("--max-rounds", self.max_rounds, 1000)?;
        if self.kill_after_ms > 60_000 {
            return Err(Error::Input("--kill-after-ms must be at most 60000".into()));
        }
        Ok(())
    }
}

/// One session's part of a round: submit, wait for the first event. The run id and the
/// instant the submit was sent.
async fn start_run(ctx: &Ctx, slot: &Slot) -> Option<(String, Instant)> {
    let prompt = format!("{} {SLOW_MARKER}", ctx.common.prompt);
    let (run_id, sent) = slot.tracked.submit(&prompt, &ctx.metrics).await.ok()?;
    slot.add_run(run_id.clone());
    match slot
        .tracked
        .wait_first_event(&run_id, sent + ctx.run_timeout())
        .await
    {
        Some(times) => {
            if let Some(first) = times.first_event {
                ctx.metrics.record(
                    metrics::SUBMIT_FIRST_EVENT,
                    first.saturating_duration_since(sent),
                );
            }
        }
        None => ctx.metrics.error("first_event_timeout"),
    }
    Some((run_id, sent))
}

/// Reconnect, then follow the run to its end.
async fn recover(ctx: &Ctx, slot: &Slot, round: usize, run: Option<(String, Instant)>) {
    let url = ctx.target().url(slot.index + round + 1).to_string();
    let deadline = Instant::now() + ctx.run_timeout();
    if slot
        .tracked
        .reconnect(&ctx.connector, &url, &ctx.metrics, deadline)
        .await
        .is_err()
    {
        ctx.metrics.violation(format!(
            "session {}: reconnect to {url} failed",
            slot.tracked.session_id
        ));
        return;
    }
    let Some((run_id, sent)) = run else {
        return;
    };
    match slot
        .tracked
        .wait_terminal(&run_id, sent + ctx.run_timeout())
        .await
    {
        Some(times) => match times.terminal {
            Some((at, Terminal::Completed)) => {
                ctx.metrics.record(
                    metrics::SUBMIT_COMPLETION,
                    at.saturating_duration_since(sent),
                );
                ctx.metrics.count("runs_completed", 1);
            }
            Some((_, Terminal::Failed(code))) => ctx.metrics.error(&format!("run_failed:{code}")),
            Some((_, Terminal::Interrupted(_))) => ctx.metrics.error("run_interrupted"),
            None => {}
        },
        None => ctx.metrics.error("run_timeout"),
    }
}

pub(crate) async fn run(
    ctx: &Ctx,
    o: &ReconnectOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    o.validate()?;
    ctx.preflight().await?;
    let slots = open_slots(ctx, o.sessions, false).await?;
    let duration = secs(o.duration_secs);
    let begin = Instant::now();
    let progress = Progress::new(ctx.progress, o.max_rounds as u64, "rounds");
    let mut round = 0;
    while round < o.max_rounds && (round == 0 || begin.elapsed() < duration) {
        let runs = join_all(slots.iter().map(|slot| start_run(ctx, slot))).await;
        tokio::time::sleep(Duration::from_millis(o.kill_after_ms)).await;
        let mut in_flight = 0;
        for (slot, run) in slots.iter().zip(&runs) {
            if let Some((run_id, _)) = run {
                if slot
                    .tracked
                    .wait_terminal(run_id, Instant::now())
                    .await
                    .is_none()
                {
                    in_flight += 1;
                }
            }
        }
        ctx.metrics.count("runs_in_flight_at_kill", in_flight);
        join_all(slots.iter().map(|slot| slot.tracked.kill())).await;
        ctx.metrics.count("connections_dropped", slots.len() as u64);
        join_all(
            slots
                .iter()
                .zip(runs)
                .map(|(slot, run)| recover(ctx, slot, round, run)),
        )
        .await;
        round += 1;
        progress.inc(1);
    }
    progress.finish();
    ctx.metrics.count("rounds", round as u64);
    let verification = verify_slots(ctx, &slots).await;
    close_slots(&slots).await;
    let mut report = base_report(ctx, name, o, started);
    report.verification = Some(verification);
    Ok(report)
}
