//! One report from the reports of several generator processes that drove one cluster at
//! the same time (`lumina-loadtest merge`): one process can hold only as many connections
//! as its open-file limit allows, 10,000 sessions with an observer each need 20,000.

use super::{Report, TargetSummary, VerificationSummary};
use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// Scenarios whose reports add up: sessions driven side by side, no per-trial or per-step
/// details that would need lining up.
const MERGEABLE: [&str; 2] = ["steady", "reconnect-storm"];

impl Report {
    /// The reports as one: latencies from their recorded histograms (exact percentiles, not
    /// an average of percentiles), errors, counters, violations and verifications summed,
    /// the span from the earliest start to the latest end, `ok` only if every one was.
    pub fn merge(reports: &[Report]) -> Result<Report> {
        let Some(first) = reports.first() else {
            return Err(Error::Input("merge needs at least one report".into()));
        };
        for r in reports {
            if !MERGEABLE.contains(&r.scenario.as_str()) {
                return Err(Error::Input(format!(
                    "merge takes {} reports, not {}",
                    MERGEABLE.join(" and "),
                    r.scenario
                )));
            }
            if r.scenario != first.scenario {
                return Err(Error::Input(format!(
                    "cannot merge a {} report with a {} report",
                    first.scenario, r.scenario
                )));
            }
            if r.recorded.is_empty() && !r.metrics.values().all(|s| s.count == 0) {
                return Err(Error::Input(
                    "a report without recorded latencies (written before `recorded` existed) cannot be merged".into(),
                ));
            }
        }
        let mut metrics = Metrics::default();
        for r in reports {
            metrics.merge(&Metrics::with_recorded(
                &r.recorded,
                &r.errors,
                &r.counters,
                &r.violations,
                r.violation_count,
            ));
        }
        let started = reports.iter().map(|r| r.started_at_ms).min().unwrap_or(0);
        let ended = reports
            .iter()
            .map(|r| r.started_at_ms.saturating_add(r.duration_ms))
            .max()
            .unwrap_or(started);
        let verification = reports
            .iter()
            .filter_map(|r| r.verification.as_ref())
            .fold(None, |sum: Option<VerificationSummary>, v| {
                Some(add(sum.unwrap_or_default(), v))
            });
        let mut merged = Report::from_metrics(
            &first.scenario,
            serde_json::json!({
                "merged": reports.iter().map(|r| r.parameters.clone()).collect::<Vec<_>>()
            }),
            target(reports),
            (started, ended - started),
            &metrics,
        );
        merged.verification = verification;
        merged.ok = merged.ok
            && reports.iter().all(|r| r.ok)
            && merged.verification.as_ref().is_none_or(|v| v.clean());
        Ok(merged)
    }
}

/// Every URL and instance once, in first-seen order; the auth sources joined if they differ.
fn target(reports: &[Report]) -> TargetSummary {
    let mut summary = TargetSummary {
        urls: Vec::new(),
        auth: String::new(),
        instances: Vec::new(),
    };
    let mut auths: Vec<&str> = Vec::new();
    for r in reports {
        for url in &r.target.urls {
            if !summary.urls.contains(url) {
                summary.urls.push(url.clone());
            }
        }
        for id in &r.target.instances {
            if !summary.instances.contains(id) {
                summary.instances.push(id.clone());
            }
        }
        if !auths.contains(&r.target.auth.as_str()) {
            auths.push(&r.target.auth);
        }
    }
    summary.auth = auths.join("; ");
    summary
}

fn add(mut sum: VerificationSummary, v: &VerificationSummary) -> VerificationSummary {
    sum.sessions += v.sessions;
    sum.clients += v.clients;
    sum.events_checked += v.events_checked;
    sum.lost += v.lost;
    sum.duplicated += v.duplicated;
    sum.out_of_order += v.out_of_order;
    sum.mismatched += v.mismatched;
    sum.runs_submitted += v.runs_submitted;
    sum.runs_well_formed += v.runs_well_formed;
    sum.runs_malformed += v.runs_malformed;
    sum.runs_unfinished += v.runs_unfinished;
    sum.wire_duplicates += v.wire_duplicates;
    sum.gaps_backfilled += v.gaps_backfilled;
    sum
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::SUBMIT_FIRST_EVENT;

    fn report(scenario: &str, started_at_ms: u64, latencies_ms: &[u64]) -> Report {
        let mut m = Metrics::default();
        for &ms in latencies_ms {
            m.record(SUBMIT_FIRST_EVENT, Duration::from_millis(ms));
        }
        m.count("submits", latencies_ms.len() as u64);
        Report {
            tool: "lumina-loadtest".into(),
            version: "0".into(),
            scenario: scenario.into(),
            started_at_ms,
            duration_ms: 10_000,
            target: TargetSummary {
                urls: vec![format!("ws://127.0.0.1:{started_at_ms}/v1/ws")],
                auth: "minted".into(),
                instances: vec!["i1".into()],
            },
            parameters: serde_json::json!({"sessions": latencies_ms.len()}),
            ok: true,
            metrics: m.summaries(),
            recorded: m.recorded(),
            errors: m.errors().clone(),
            counters: m.counters().clone(),
            violations: Vec::new(),
            violation_count: 0,
            verification: Some(VerificationSummary {
                sessions: latencies_ms.len() as u64,
                runs_submitted: latencies_ms.len() as u64,
                runs_well_formed: latencies_ms.len() as u64,
                ..VerificationSummary::default()
            }),
            idle: None,
            storm: None,
            ramp: None,
            failover: None,
            chaos: None,
        }
    }

    #[test]
    fn percentiles_come_from_the_union_not_from_averaging() {
        // 99 fast submits in one process, one process whose submits are all slow: the
        // union's p99 is fast, its max slow, and the counts add up.
        let fast = report("steady", 1_000, &[5; 99]);
        let slow = report("steady", 3_000, &[900; 2]);
        let merged = Report::merge(&[fast, slow]).expect("merged");
        let s = &merged.metrics[SUBMIT_FIRST_EVENT];
        assert_eq!(s.count, 101);
        assert!((s.p50_ms - 5.0).abs() < 0.01, "{s:?}");
        assert!(s.p99_ms > 800.0, "the top 1% holds a slow one: {s:?}");
        assert!(s.max_ms > 800.0);
        assert_eq!(merged.counters["submits"], 101);
        assert_eq!(merged.verification.as_ref().map(|v| v.sessions), Some(101));
        assert_eq!(merged.started_at_ms, 1_000);
        assert_eq!(merged.duration_ms, 12_000);
        assert_eq!(merged.target.urls.len(), 2);
        assert_eq!(merged.target.instances, vec!["i1".to_string()]);
        assert!(merged.ok);
        // What merge writes merges again the same way.
        let again = Report::merge(std::slice::from_ref(&merged)).expect("merged again");
        assert_eq!(again.metrics, merged.metrics);
    }

    #[test]
    fn a_violation_or_error_anywhere_fails_the_merge_result() {
        let good = report("steady", 0, &[5]);
        let mut bad = report("steady", 0, &[5]);
        bad.errors.insert("run_timeout".into(), 1);
        bad.ok = false;
        let merged = Report::merge(&[good.clone(), bad]).expect("merged");
        assert!(!merged.ok);
        assert_eq!(merged.errors["run_timeout"], 1);
        let mut lost = report("steady", 0, &[5]);
        if let Some(v) = lost.verification.as_mut() {
            v.lost = 1;
        }
        assert!(!Report::merge(&[good, lost]).expect("merged").ok);
    }

    #[test]
    fn only_like_reports_of_side_by_side_scenarios_merge() {
        let steady = report("steady", 0, &[5]);
        let storm = report("reconnect-storm", 0, &[5]);
        let ramp = report("ramp", 0, &[5]);
        let refused = |rs: &[Report]| match Report::merge(rs) {
            Err(Error::Input(message)) => message,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(refused(&[]).contains("at least one"));
        assert!(refused(&[steady.clone(), storm]).contains("cannot merge a steady report"));
        assert!(refused(&[ramp]).contains("not ramp"));
        let mut old = steady;
        old.recorded.clear();
        assert!(refused(&[old]).contains("without recorded latencies"));
    }
}
