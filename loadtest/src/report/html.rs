//! The HTML page: summary tables and inline SVG plots drawn with `plotters` (SVG backend
//! only, text left to the browser): latency CDFs, the ramp's p99 per step, and the failover
//! latencies per trial.

use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::Summary;
use crate::report::Report;

const WIDTH: u32 = 760;
const HEIGHT: u32 = 380;

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::Report(format!("cannot draw a plot: {e}"))
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

/// All latency CDFs on one chart, x in ms on a log scale.
pub fn cdf_svg(title: &str, series: &[(&str, &Summary)]) -> Result<String> {
    let points: Vec<f64> = series
        .iter()
        .flat_map(|(_, s)| s.cdf.iter().map(|p| p[0]))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = points.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = points.iter().copied().fold(0.0f64, f64::max);
    if !lo.is_finite() || hi <= 0.0 {
        return Ok(String::new());
    }
    let (lo, hi) = (lo * 0.8, (hi * 1.25).max(lo * 2.0));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.0f64)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("latency, ms (log scale)")
            .y_desc("fraction ≤ x")
            .draw()
            .map_err(plot_error)?;
        for (i, (name, summary)) in series.iter().enumerate() {
            let c = color(i);
            // A step function: each value holds its fraction until the next one.
            let mut steps = Vec::with_capacity(summary.cdf.len() * 2 + 1);
            let mut previous = 0.0;
            for p in &summary.cdf {
                let x = p[0].max(lo);
                steps.push((x, previous));
                steps.push((x, p[1]));
                previous = p[1];
            }
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(plot_error)?
                .label(format!("{name} (n={})", summary.count))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

/// Lines over an x axis (ramp steps, failover trials), optionally with a horizontal limit.
pub fn lines_svg(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(&str, Vec<(f64, f64)>)],
    limit: Option<f64>,
) -> Result<String> {
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|v| v.0));
    let ys = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|v| v.1))
        .chain(limit);
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let y_hi = ys.fold(0.0f64, f64::max);
    if !x_lo.is_finite() || !x_hi.is_finite() {
        return Ok(String::new());
    }
    let x_hi = if x_hi > x_lo { x_hi } else { x_lo + 1.0 };
    let y_hi = if y_hi > 0.0 { y_hi * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x_lo..x_hi, 0.0f64..y_hi)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(plot_error)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
                .map_err(plot_error)?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart
                .draw_series(PointSeries::of_element(
                    points.clone(),
                    3,
                    c.filled(),
                    &|coord, size, style| {
                        EmptyElement::at(coord) + Circle::new((0, 0), size, style)
                    },
                ))
                .map_err(plot_error)?;
        }
        if let Some(limit) = limit {
            let c = RGBColor(200, 0, 0);
            chart
                .draw_series(LineSeries::new(
                    vec![(x_lo, limit), (x_hi, limit)],
                    c.stroke_width(1),
                ))
                .map_err(plot_error)?
                .label("threshold")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

pub(crate) fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in head {
        out.push_str(&format!("<th>{}</th>", escape(h)));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            out.push_str(&format!("<td>{}</td>", escape(cell)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    out
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

pub(crate) fn opt(v: Option<f64>) -> String {
    v.map(f2).unwrap_or_else(|| "–".into())
}

/// The whole page.
pub fn render(report: &Report) -> Result<String> {
    let mut body = String::new();
    body.push_str(&format!(
        "<h1>lumina-loadtest: {}</h1>\n<p class=\"{}\">{}</p>\n",
        escape(&report.scenario),
        if report.ok { "ok" } else { "bad" },
        if report.ok {
            "OK: no errors, no violations"
        } else {
            "FAILED: see errors and violations below"
        }
    ));
    body.push_str(&table(
        &["started (unix ms)", "duration", "targets", "credentials"],
        &[vec![
            report.started_at_ms.to_string(),
            format!("{:.1} s", report.duration_ms as f64 / 1000.0),
            report.target.urls.join(" "),
            report.target.auth.clone(),
        ]],
    ));
    body.push_str("<h2>Parameters</h2>\n<pre>");
    body.push_str(&escape(
        &serde_json::to_string_pretty(&report.parameters).unwrap_or_default(),
    ));
    body.push_str("</pre>\n<h2>Latencies</h2>\n");
    let rows: Vec<Vec<String>> = report
        .metrics
        .iter()
        .map(|(name, s)| {
            vec![
                name.clone(),
                s.count.to_string(),
                f2(s.min_ms),
                f2(s.mean_ms),
                f2(s.p50_ms),
                f2(s.p90_ms),
                f2(s.p99_ms),
                f2(s.p999_ms),
                f2(s.max_ms),
            ]
        })
        .collect();
    body.push_str(&table(
        &[
            "metric", "n", "min ms", "mean ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms",
        ],
        &rows,
    ));
    let series: Vec<(&str, &Summary)> = report
        .metrics
        .iter()
        .filter(|(_, s)| s.count > 0)
        .map(|(n, s)| (n.as_str(), s))
        .collect();
    if !series.is_empty() {
        body.push_str(&cdf_svg("Latency CDFs", &series)?);
        for (name, summary) in &series {
            body.push_str(&cdf_svg(&format!("CDF of {name}"), &[(*name, *summary)])?);
        }
    }
    body.push_str("<h2>Errors</h2>\n");
    if report.errors.is_empty() {
        body.push_str("<p>none</p>\n");
    } else {
        let rows: Vec<Vec<String>> = report
            .errors
            .iter()
            .map(|(k, n)| vec![k.clone(), n.to_string()])
            .collect();
        body.push_str(&table(&["kind", "count"], &rows));
    }
    body.push_str(&format!(
        "<h2>Violations ({})</h2>\n",
        report.violation_count
    ));
    for v in &report.violations {
        body.push_str(&format!("<p class=\"bad\">{}</p>\n", escape(v)));
    }
    if !report.counters.is_empty() {
        body.push_str("<h2>Counters</h2>\n");
        let rows: Vec<Vec<String>> = report
            .counters
            .iter()
            .map(|(k, n)| vec![k.clone(), n.to_string()])
            .collect();
        body.push_str(&table(&["counter", "value"], &rows));
    }
    if let Some(v) = &report.verification {
        body.push_str("<h2>Exactly-once verification</h2>\n");
        body.push_str(&format!(
            "<pre>{}</pre>\n",
            escape(&serde_json::to_string_pretty(v).unwrap_or_default())
        ));
    }
    body.push_str(&details(report)?);
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>lumina-loadtest {}</title><style>{}</style></head><body>\n{}</body></html>\n",
        escape(&report.scenario),
        STYLE,
        body
    ))
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:64em}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.2em .6em;\
text-align:right}th{background:#f3f3f3}.ok{color:#070}.bad{color:#b00}svg{display:block;\
margin:1em 0}pre{background:#f7f7f7;padding:.6em}";

fn details(report: &Report) -> Result<String> {
    let mut out = String::new();
    if let Some(idle) = &report.idle {
        out.push_str("<h2>Idle connections</h2>\n");
        out.push_str(&format!(
            "<pre>{}</pre>\n",
            escape(&serde_json::to_string_pretty(idle).unwrap_or_default())
        ));
    }
    if let Some(storm) = &report.storm {
        out.push_str("<h2>Connect storm</h2>\n");
        out.push_str(&format!(
            "<pre>{}</pre>\n",
            escape(&serde_json::to_string_pretty(storm).unwrap_or_default())
        ));
    }
    if let Some(ramp) = &report.ramp {
        out.push_str("<h2>Ramp</h2>\n");
        let rows: Vec<Vec<String>> = ramp
            .steps
            .iter()
            .map(|s| {
                vec![
                    f2(s.target_rate),
                    f2(s.achieved_rate),
                    s.submits.to_string(),
                    f2(s.p50_ack_ms),
                    f2(s.p99_ack_ms),
                    f2(s.p50_first_event_ms),
                    f2(s.p99_first_event_ms),
                    f2(s.p99_completion_ms),
                    s.errors.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "target /s",
                "achieved /s",
                "submits",
                "p50 ack",
                "p99 ack",
                "p50 first event",
                "p99 first event",
                "p99 completion",
                "errors",
            ],
            &rows,
        ));
        out.push_str(&format!(
            "<p>Highest rate within {} ms: {} /s; first rate past it: {} /s</p>\n",
            ramp.threshold_ms,
            opt(ramp.max_rate_within_threshold),
            opt(ramp.crossed_at_rate)
        ));
        let first: Vec<(f64, f64)> = ramp
            .steps
            .iter()
            .map(|s| (s.target_rate, s.p99_first_event_ms))
            .collect();
        let ack: Vec<(f64, f64)> = ramp
            .steps
            .iter()
            .map(|s| (s.target_rate, s.p99_ack_ms))
            .collect();
        out.push_str(&lines_svg(
            "p99 by submit rate",
            "submits per second",
            "ms",
            &[("p99 submit→first event", first), ("p99 submit→ack", ack)],
            Some(ramp.threshold_ms),
        )?);
    }
    if let Some(failover) = &report.failover {
        out.push_str(&format!(
            "<h2>Failover: {} of {} trials ok</h2>\n",
            failover.trials_ok, failover.trials_run
        ));
        let series = |f: fn(&crate::report::FailoverTrial) -> Option<f64>| -> Vec<(f64, f64)> {
            failover
                .trials
                .iter()
                .filter_map(|t| f(t).map(|v| (t.trial as f64, v)))
                .collect()
        };
        out.push_str(&lines_svg(
            "Submit through a survivor right after kill -9 of the owner",
            "trial",
            "ms",
            &[
                ("submit→ack", series(|t| t.ack_ms)),
                ("submit→first event", series(|t| t.first_event_ms)),
                ("submit→completion", series(|t| t.completion_ms)),
            ],
            None,
        )?);
        let rows: Vec<Vec<String>> = failover
            .trials
            .iter()
            .map(|t| {
                vec![
                    t.trial.to_string(),
                    t.killed.clone(),
                    t.submitted_via.clone(),
                    t.new_owner.clone().unwrap_or_default(),
                    t.submit_attempts.to_string(),
                    opt(t.ack_ms),
                    opt(t.first_event_ms),
                    opt(t.completion_ms),
                    opt(t.restart_ready_ms),
                    if t.ok {
                        "ok".into()
                    } else {
                        t.error.clone().unwrap_or_else(|| "failed".into())
                    },
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "trial",
                "killed",
                "via",
                "new owner",
                "attempts",
                "ack ms",
                "first event ms",
                "completion ms",
                "restart ready ms",
                "result",
            ],
            &rows,
        ));
    }
    if let Some(chaos) = &report.chaos {
        out.push_str(&super::chaos_html::render(chaos)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn draws_svg() {
        let summary = Summary {
            count: 3,
            min_ms: 1.0,
            mean_ms: 2.0,
            p50_ms: 2.0,
            p90_ms: 3.0,
            p99_ms: 3.0,
            p999_ms: 3.0,
            max_ms: 3.0,
            cdf: vec![[1.0, 0.33], [2.0, 0.66], [3.0, 1.0]],
        };
        let svg = cdf_svg("t", &[("submit_ack", &summary)]).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("submit_ack"));
        let lines = lines_svg(
            "t",
            "x",
            "y",
            &[("a", vec![(1.0, 2.0), (2.0, 3.0)])],
            Some(2.5),
        )
        .unwrap();
        assert!(lines.contains("<svg"));
    }
}
