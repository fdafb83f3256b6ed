//! The `chaos` part of the HTML page: a table per fault kind, the recovery time per trial
//! (one series per kind), and every trial with its violations.

use super::html::{escape, lines_svg, opt, table};
use super::ChaosDetails;
use crate::error::Result;

pub(super) fn render(chaos: &ChaosDetails) -> Result<String> {
    let mut out = format!(
        "<h2>Chaos</h2>\n<p>Liveness TTL of the instances: {} ms. Recovery: from the fault \
         until the cluster acknowledged a submit of the probe session sent after it.</p>\n",
        chaos.lease_ttl_ms
    );
    let rows: Vec<Vec<String>> = chaos
        .kinds
        .iter()
        .map(|k| {
            vec![
                k.kind.clone(),
                k.trials_run.to_string(),
                k.trials_ok.to_string(),
                k.violations.to_string(),
                k.acked_submits.to_string(),
                opt(k.recovery_p50_ms),
                opt(k.recovery_p99_ms),
                opt(k.recovery_max_ms),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "fault",
            "trials",
            "ok",
            "violations",
            "acked submits",
            "recovery p50 ms",
            "recovery p99 ms",
            "recovery max ms",
        ],
        &rows,
    ));
    let series: Vec<(String, Vec<(f64, f64)>)> = chaos
        .kinds
        .iter()
        .map(|k| {
            let points = chaos
                .trials
                .iter()
                .filter(|t| t.kind == k.kind)
                .filter_map(|t| t.recovery_ms.map(|r| (t.trial as f64, r)))
                .collect();
            (k.kind.clone(), points)
        })
        .filter(|(_, p): &(String, Vec<(f64, f64)>)| !p.is_empty())
        .collect();
    if !series.is_empty() {
        let refs: Vec<(&str, Vec<(f64, f64)>)> = series
            .iter()
            .map(|(n, p)| (n.as_str(), p.clone()))
            .collect();
        out.push_str(&lines_svg(
            "Recovery per trial",
            "trial",
            "ms",
            &refs,
            None,
        )?);
    }
    let rows: Vec<Vec<String>> = chaos
        .trials
        .iter()
        .map(|t| {
            vec![
                t.kind.clone(),
                t.trial.to_string(),
                t.target.clone(),
                t.probe_owner.clone(),
                t.method.clone(),
                format!("{}/{}", t.acked, t.submits),
                t.events_checked.to_string(),
                opt(t.recovery_ms),
                if t.ok {
                    "ok".into()
                } else {
                    t.error.clone().unwrap_or_else(|| "violations".into())
                },
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "fault",
            "trial",
            "target",
            "probe owner",
            "what",
            "acked/submits",
            "events",
            "recovery ms",
            "result",
        ],
        &rows,
    ));
    for t in chaos.trials.iter().filter(|t| !t.violations.is_empty()) {
        out.push_str(&format!("<h3>{} #{}</h3>\n", escape(&t.kind), t.trial));
        for v in &t.violations {
            out.push_str(&format!("<p class=\"bad\">{}</p>\n", escape(v)));
        }
    }
    Ok(out)
}
