//! Short `steady` and `reconnect-storm` runs against a real local backend (the
//! `lumina-backend serve` binary, SQLite, the scripted model server). The assertions are
//! about correctness only — no errors, nothing lost or applied twice, the report's shape —
//! never about timing.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::LocalBackend;
use lumina_loadtest::{ReconnectOptions, Report, Scenario, SteadyOptions};

fn assert_clean(report: &Report) {
    assert!(report.errors.is_empty(), "errors: {:?}", report.errors);
    assert_eq!(
        report.violation_count, 0,
        "violations: {:?}",
        report.violations
    );
    let v = report.verification.as_ref().expect("verification");
    assert!(v.clean(), "{v:?}");
    assert!(v.runs_submitted > 0, "{v:?}");
    assert_eq!(v.runs_well_formed, v.runs_submitted, "{v:?}");
    assert_eq!(
        report.counters.get("runs_completed"),
        Some(&v.runs_submitted)
    );
    assert_eq!(v.lost, 0);
    assert_eq!(v.duplicated, 0);
    assert!(v.events_checked > 0);
    assert!(report.ok);
}

/// The written JSON has the documented fields and the HTML page has its plots.
fn assert_written(report: &Report, metrics: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (json_path, html_path) = report.write(dir.path()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json_path).unwrap()).unwrap();
    for field in [
        "tool",
        "scenario",
        "started_at_ms",
        "duration_ms",
        "target",
        "parameters",
        "ok",
        "metrics",
        "errors",
        "counters",
        "violations",
        "violation_count",
        "verification",
    ] {
        assert!(
            json.get(field).is_some(),
            "report.json lacks {field}: {json:#}"
        );
    }
    for metric in metrics {
        let m = &json["metrics"][metric];
        for field in ["count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "cdf"] {
            assert!(m.get(field).is_some(), "metric {metric} lacks {field}: {m}");
        }
        assert!(m["count"].as_u64().unwrap() > 0, "{metric}: {m}");
    }
    let text = serde_json::to_string(&json).unwrap();
    assert!(!text.contains("\"token\""), "{text}");
    let html = std::fs::read_to_string(html_path).unwrap();
    assert!(html.contains("<svg"), "no plot in the HTML report");
    assert!(html.contains(&report.scenario));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_against_a_local_backend_loses_nothing() {
    let backend = LocalBackend::start(0).await;
    // Two generators drive the backend together from a common start (as several
    // processes do when one cannot hold every connection), and `merge` makes one report.
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 2.0;
    let steady = |sessions| {
        backend.config(Scenario::Steady(SteadyOptions {
            sessions,
            rate_per_session: 2.0,
            duration_secs: 3.0,
            max_in_flight: 4,
            observers: true,
            start_at_unix_secs: Some(start),
        }))
    };
    let (first, second) = (steady(5), steady(3));
    let (first, second) = tokio::join!(lumina_loadtest::run(&first), lumina_loadtest::run(&second));
    let (first, second) = (first.unwrap(), second.unwrap());
    eprintln!("{}{}", first.text_summary(), second.text_summary());
    for report in [&first, &second] {
        assert_eq!(report.scenario, "steady");
        assert_clean(report);
        assert_eq!(report.target.auth, "local endpoint file");
    }
    let v = first.verification.as_ref().unwrap();
    assert_eq!(v.sessions, 5);
    // Every session has its primary and an observer.
    assert_eq!(v.clients, 10);
    assert_written(
        &first,
        &[
            "connect",
            "hello",
            "submit_ack",
            "submit_first_event",
            "submit_completion",
            "fanout_lag",
        ],
    );

    let dir = tempfile::tempdir().unwrap();
    let (a, b, merged) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("m"),
    );
    first.write(&a).unwrap();
    second.write(&b).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lumina-loadtest"))
        .arg("merge")
        .arg(&a)
        .arg(b.join("report.json"))
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(merged.join("report.json")).unwrap();
    let merged: Report = serde_json::from_str(&text).unwrap();
    assert_clean(&merged);
    let v = merged.verification.as_ref().unwrap();
    assert_eq!(v.sessions, 8);
    assert_eq!(v.clients, 16);
    for metric in ["submit_first_event", "submit_completion", "fanout_lag"] {
        assert_eq!(
            merged.metrics[metric].count,
            first.metrics[metric].count + second.metrics[metric].count,
            "{metric}"
        );
    }
    assert_eq!(
        merged.counters["submits"],
        first.counters["submits"] + second.counters["submits"]
    );
    assert!(std::fs::read_to_string(dir.path().join("m/report.html"))
        .unwrap()
        .contains("<svg"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_storm_against_a_local_backend_loses_nothing() {
    let backend = LocalBackend::start(100).await;
    let config = backend.config(Scenario::ReconnectStorm(ReconnectOptions {
        sessions: 5,
        duration_secs: 3.0,
        max_rounds: 3,
        kill_after_ms: 100,
    }));
    let report = lumina_loadtest::run(&config).await.unwrap();
    eprintln!("{}", report.text_summary());
    assert_eq!(report.scenario, "reconnect-storm");
    assert_clean(&report);
    let rounds = report.counters["rounds"];
    assert!(rounds >= 1);
    let dropped = report.counters["connections_dropped"];
    assert_eq!(dropped, 5 * rounds);
    // Every dropped connection came back and caught up.
    assert_eq!(report.metrics["reconnect_backfill"].count, dropped);
    assert_eq!(
        report.verification.as_ref().unwrap().runs_submitted,
        5 * rounds
    );
    assert_written(
        &report,
        &[
            "connect",
            "submit_ack",
            "submit_completion",
            "reconnect_backfill",
        ],
    );
}
