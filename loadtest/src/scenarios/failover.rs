//! `failover`: for each trial, create a session, find its owner (`session.info`), `kill -9`
//! the owner, and at once submit through a surviving instance. The submit's latency as the
//! client sees it (until its ack, until the run's first event, until completion) is the
//! figure of interest; transient refusals while the dead owner's lease lapses are retried
//! with the same idempotency key and request id and counted. The run must complete, the
//! client's events must equal the journal, and the session must have a new owner; then the
//! killed instance is restarted from the instances file and the next trial waits for its
//! `/readyz`.

use std::collections::HashMap;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime};

use lumina_client::ClientError;
use serde::Serialize;

use super::{base_report, check_count, check_secs, secs, Ctx, MAX_TRIALS};
use crate::error::{error_kind, is_transient, Error, Result};
use crate::instances::{self, Instances};
use crate::metrics;
use crate::progress::Progress;
use crate::report::{FailoverDetails, FailoverTrial, Report};
use crate::track::{submit_params, Terminal, Tracked};

/// `failover` options.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverOptions {
    pub trials: usize,
    /// How long the submit right after the kill may take, retries included.
    pub submit_timeout_secs: f64,
    /// How long a restarted instance may take to answer `/readyz` with 200.
    pub ready_timeout_secs: f64,
    /// No new trial starts after this much time.
    pub max_duration_secs: f64,
}

impl FailoverOptions {
    fn validate(&self) -> Result<()> {
        check_count("--trials", self.trials, MAX_TRIALS)?;
        check_secs("--submit-timeout", self.submit_timeout_secs)?;
        check_secs("--ready-timeout", self.ready_timeout_secs)?;
        check_secs("--max-duration", self.max_duration_secs)?;
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn http_base(instances: &Instances, i: usize) -> Result<url::Url> {
    let raw = &instances.instances[i].http_url;
    url::Url::parse(raw).map_err(|e| Error::Input(format!("invalid http_url {raw:?}: {e}")))
}

/// Checks that every instance runs and is ready before anything is killed.
async fn precheck(instances: &Instances) -> Result<()> {
    if instances.instances.len() < 2 {
        return Err(Error::Input(
            "failover needs at least two instances in the instances file".into(),
        ));
    }
    for (i, instance) in instances.instances.iter().enumerate() {
        let pid = instance.current_pid();
        if !instances::is_live_backend(pid) {
            return Err(Error::Input(format!(
                "instance {}: pid {pid} is not a running lumina-backend (is the cluster up?)",
                instance.id
            )));
        }
        if instance.restart.is_none() {
            return Err(Error::Input(format!(
                "instance {} has no restart command in the instances file",
                instance.id
            )));
        }
        instances::wait_ready(&http_base(instances, i)?, Duration::from_secs(10))
            .await
            .map_err(|e| Error::Target(format!("instance {}: {e}", instance.id)))?;
    }
    Ok(())
}

struct Trial<'a> {
    ctx: &'a Ctx,
    o: &'a FailoverOptions,
    instances: &'a Instances,
    children: &'a mut HashMap<usize, Child>,
}

impl Trial<'_> {
    fn ws(&self, i: usize) -> &str {
        &self.instances.instances[i].ws_url
    }

    /// One trial. `Err` only when the cluster cannot be used any more (an instance did not
    /// come back); problems of the trial itself are in the returned row.
    async fn run(&mut self, n: usize) -> Result<FailoverTrial> {
        let mut row = FailoverTrial {
            trial: n as u64,
            ..FailoverTrial::default()
        };
        let count = self.instances.instances.len();
        // 1. A session, created through instance n mod count; its owner.
        let ctx = self.ctx;
        let creator = ctx
            .connector
            .connect(self.ws(n % count), &ctx.metrics)
            .await;
        let Ok((client, _notes)) = creator else {
            row.error = Some("cannot connect to create the session".into());
            return Ok(row);
        };
        let session =
            Tracked::create_session(&client, ctx.common.project_root.as_deref(), "failover").await;
        let owner = match &session {
            Ok(id) => client.session_info(id).await.map(|info| info.owner),
            Err(e) => Err(e.clone()),
        };
        client.close();
        let (session, owner) = match (session, owner) {
            (Ok(s), Ok(o)) => (s, o),
            (Err(e), _) | (_, Err(e)) => {
                ctx.metrics.error(&format!("setup:{}", error_kind(&e)));
                row.error = Some(format!("session set-up failed: {e}"));
                return Ok(row);
            }
        };
        row.session_id = session.clone();
        let Some(owner_idx) = self.instances.position(&owner) else {
            ctx.metrics.violation(format!(
                "session {session}: owner {owner:?} is not in the instances file"
            ));
            row.error = Some(format!("unknown owner {owner}"));
            return Ok(row);
        };
        row.killed = owner.clone();
        // 2. A client of the session on a survivor (rotating over the others).
        let via = (owner_idx + 1 + n % (count - 1)) % count;
        row.submitted_via = self.instances.instances[via].id.clone();
        let tracked = match ctx.connector.connect(self.ws(via), &ctx.metrics).await {
            Ok((client, notes)) => Tracked::subscribe(client, notes, &session, false).await,
            Err(e) => Err(e),
        };
        let tracked = match tracked {
            Ok(t) => t,
            Err(e) => {
                row.error = Some(format!(
                    "cannot subscribe through {}: {e}",
                    row.submitted_via
                ));
                return Ok(row);
            }
        };
        // 3. kill -9 the owner.
        let pid = self.instances.instances[owner_idx].current_pid();
        row.killed_pid = pid;
        let mut child = self.children.remove(&owner_idx);
        if let Err(e) = instances::kill9(pid, child.as_mut()) {
            ctx.metrics.violation(format!("trial {n}: {e}"));
            row.error = Some(e.to_string());
            tracked.kill().await;
            return Ok(row);
        }
        let killed_at = Instant::now();
        // 4. Submit through the survivor at once.
        let outcome = self.submit_after_kill(&tracked, via, &mut row).await;
        if let Some((run_id, sent)) = outcome {
            ctx.metrics
                .record(metrics::KILL_TO_ACK, killed_at.elapsed());
            self.follow_run(&tracked, &run_id, sent, &mut row).await;
        }
        if let Some(client) = tracked.client() {
            match client.session_info(&session).await {
                Ok(info) => {
                    if info.owner == owner {
                        ctx.metrics.violation(format!(
                            "session {session}: still owned by the killed {owner}"
                        ));
                        row.error
                            .get_or_insert_with(|| "owner did not change".into());
                    }
                    row.new_owner = Some(info.owner);
                }
                Err(e) => ctx.metrics.error(&format!("info:{}", error_kind(&e))),
            }
        }
        tracked.kill().await;
        row.ok = row.error.is_none();
        // 5. Bring the killed instance back before the next trial.
        let instance = &self.instances.instances[owner_idx];
        let restarted = Instant::now();
        let child = instances::restart(instance)
            .map_err(|e| Error::Target(format!("restarting {}: {e}", instance.id)))?;
        self.children.insert(owner_idx, child);
        instances::wait_ready(
            &http_base(self.instances, owner_idx)?,
            secs(self.o.ready_timeout_secs),
        )
        .await
        .map_err(|e| Error::Target(format!("restarted {}: {e}", instance.id)))?;
        let took = restarted.elapsed();
        ctx.metrics.record(metrics::RESTART_READY, took);
        row.restart_ready_ms = Some(ms(took));
        Ok(row)
    }

    /// The submit right after the kill, retried (same key, same request id) on transient
    /// errors until the submit timeout. The run id and when the first attempt was sent.
    async fn submit_after_kill(
        &self,
        tracked: &Tracked,
        via: usize,
        row: &mut FailoverTrial,
    ) -> Option<(String, Instant)> {
        let ctx = self.ctx;
        let params = submit_params(&tracked.session_id, &ctx.common.prompt);
        let request_id = uuid::Uuid::new_v4().to_string();
        let timeout = secs(self.o.submit_timeout_secs);
        let sent = Instant::now();
        loop {
            row.submit_attempts += 1;
            let left = timeout.saturating_sub(sent.elapsed());
            let result = match tracked.client() {
                Some(client) => {
                    client
                        .with_call_timeout(left.max(Duration::from_millis(100)))
                        .session_submit_with_id(request_id.clone(), &params)
                        .await
                }
                None => Err(ClientError::Closed),
            };
            match result {
                Ok(result) => {
                    let ack = sent.elapsed();
                    ctx.metrics.record(metrics::SUBMIT_ACK, ack);
                    row.ack_ms = Some(ms(ack));
                    return Some((result.run_id, sent));
                }
                Err(e) if is_transient(&e) && sent.elapsed() < timeout => {
                    ctx.metrics.count("submit_retries", 1);
                    ctx.metrics
                        .count(&format!("submit_retry:{}", error_kind(&e)), 1);
                    if matches!(e, ClientError::Closed) {
                        let deadline = sent + timeout;
                        let url = self.instances.instances[via].ws_url.clone();
                        let _ = tracked
                            .reconnect(&ctx.connector, &url, &ctx.metrics, deadline)
                            .await;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => {
                    ctx.metrics.error(&format!("submit:{}", error_kind(&e)));
                    row.error = Some(format!("submit failed: {e}"));
                    return None;
                }
            }
        }
    }

    async fn follow_run(
        &self,
        tracked: &Tracked,
        run_id: &str,
        sent: Instant,
        row: &mut FailoverTrial,
    ) {
        let ctx = self.ctx;
        match tracked
            .wait_terminal(run_id, sent + ctx.run_timeout())
            .await
        {
            Some(times) => {
                if let Some(first) = times.first_event {
                    let d = first.saturating_duration_since(sent);
                    ctx.metrics.record(metrics::SUBMIT_FIRST_EVENT, d);
                    row.first_event_ms = Some(ms(d));
                }
                match times.terminal {
                    Some((at, Terminal::Completed)) => {
                        let d = at.saturating_duration_since(sent);
                        ctx.metrics.record(metrics::SUBMIT_COMPLETION, d);
                        row.completion_ms = Some(ms(d));
                    }
                    other => {
                        ctx.metrics.error("run_not_completed");
                        ctx.metrics.violation(format!(
                            "trial {}: run {run_id} ended {other:?}",
                            row.trial
                        ));
                        row.error = Some(format!("run ended {other:?}"));
                    }
                }
            }
            None => {
                ctx.metrics.error("run_timeout");
                ctx.metrics
                    .violation(format!("trial {}: run {run_id} did not end", row.trial));
                row.error = Some("run did not end".into());
            }
        }
        let Some(client) = tracked.client() else {
            return;
        };
        match tracked.verify(&client).await {
            Ok(v) => {
                for problem in v.problems {
                    ctx.metrics
                        .violation(format!("trial {}: {problem}", row.trial));
                    row.error
                        .get_or_insert_with(|| "events differ from the journal".into());
                }
                if v.runs.get(run_id).map(|r| (r.started, r.ended)) != Some((1, 1)) {
                    ctx.metrics.violation(format!(
                        "trial {}: run {run_id} is not started and ended exactly once",
                        row.trial
                    ));
                    row.error
                        .get_or_insert_with(|| "run journaled wrongly".into());
                }
            }
            Err(e) => ctx.metrics.error(&format!("verify:{}", error_kind(&e))),
        }
    }
}

pub(crate) async fn run(
    ctx: &Ctx,
    o: &FailoverOptions,
    name: &str,
    started: (SystemTime, Instant),
) -> Result<Report> {
    o.validate()?;
    let Some(instances) = ctx.target().instances.clone() else {
        return Err(Error::Input(
            "failover needs --instances FILE (written by scripts/local-cluster)".into(),
        ));
    };
    precheck(&instances).await?;
    let mut children = HashMap::new();
    let max_duration = secs(o.max_duration_secs);
    let begin = Instant::now();
    let progress = Progress::new(ctx.progress, o.trials as u64, "trials");
    let mut trials = Vec::new();
    let mut fatal = None;
    for n in 0..o.trials {
        if begin.elapsed() > max_duration {
            ctx.metrics
                .count("trials_skipped_by_max_duration", (o.trials - n) as u64);
            break;
        }
        let mut trial = Trial {
            ctx,
            o,
            instances: &instances,
            children: &mut children,
        };
        match trial.run(n).await {
            Ok(row) => {
                if !row.ok {
                    ctx.metrics.error("trial_failed");
                }
                progress.message(format!("last ack {:.0} ms", row.ack_ms.unwrap_or(f64::NAN)));
                trials.push(row);
            }
            Err(e) => {
                ctx.metrics
                    .violation(format!("stopped after trial {n}: {e}"));
                fatal = Some(e);
                break;
            }
        }
        progress.inc(1);
    }
    progress.finish();
    let trials_ok = trials.iter().filter(|t| t.ok).count() as u64;
    let mut report = base_report(ctx, name, o, started);
    report.failover = Some(FailoverDetails {
        trials_run: trials.len() as u64,
        trials_ok,
        trials,
    });
    if fatal.is_some() {
        report.ok = false;
    }
    Ok(report)
}
