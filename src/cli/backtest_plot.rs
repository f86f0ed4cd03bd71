//! `backtest --plot out.svg`: one timeline panel per metric (value line, measurement markers
//! coloured by phase, the threshold its condition names, the run's end), with the `svg` crate
//! (maintained, escapes text) rather than hand-built XML.

use std::path::Path;

use chrono::{DateTime, Utc};
use svg::node::element::{Circle, Line, Polyline, Rectangle, Text};
use svg::Document;

use crate::measurement::Phase;

/// One metric's panel input.
pub(super) struct Panel<'a> {
    pub name: &'a str,
    /// `(time, phase, value)` of each measurement.
    pub points: Vec<(DateTime<Utc>, Phase, Option<f64>)>,
    /// The condition's source, for a threshold like `result[0] < 0.02`.
    pub conditions: Vec<String>,
}

const WIDTH: f64 = 1000.0;
const PANEL: f64 = 190.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 56.0;
const PLOT_H: f64 = 120.0;

fn colour(p: Phase) -> &'static str {
    match p {
        Phase::Successful => "#2e9e44",
        Phase::Failed => "#d62728",
        Phase::Inconclusive => "#ff9f1c",
        Phase::Error => "#8e44ad",
        Phase::Running => "#7f7f7f",
    }
}

/// The first number of a measurement value: `0.1`, `[0.1, 0.2]`, or a compare object's
/// `canary.rate` / `effect`.
pub(super) fn numeric(value: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(value.trim()).ok()?;
    let n = match &v {
        serde_json::Value::Array(items) => items.first()?.as_f64(),
        serde_json::Value::Object(_) => v
            .pointer("/canary/rate")
            .or_else(|| v.get("effect"))
            .and_then(serde_json::Value::as_f64),
        other => other.as_f64(),
    };
    n.filter(|x| x.is_finite())
}

/// A threshold the condition compares `result` (or `result[0]`) with, if it names one.
fn threshold(condition: &str) -> Option<f64> {
    let re =
        regex::Regex::new(r"result(?:\[0\])?\s*(?:<=|>=|<|>|==)\s*(-?[0-9][0-9.eE+-]*)").ok()?;
    re.captures(condition)?.get(1)?.as_str().parse().ok()
}

/// Writes the SVG to `path`.
pub(super) fn write(
    path: &Path,
    panels: &[Panel<'_>],
    from: DateTime<Utc>,
    end: DateTime<Utc>,
    verdict: &str,
    verdict_phase: Phase,
) -> Result<(), String> {
    let span = (end - from).num_milliseconds().max(1) as f64;
    let x_of = |t: DateTime<Utc>| {
        LEFT + (t - from).num_milliseconds() as f64 / span * (WIDTH - LEFT - RIGHT)
    };
    let height = TOP + PANEL * panels.len() as f64 + 20.0;
    let mut doc = Document::new()
        .set("viewBox", (0, 0, WIDTH, height))
        .set("width", WIDTH)
        .set("height", height)
        .set("font-family", "sans-serif")
        .set("font-size", 12)
        .add(
            Rectangle::new()
                .set("width", "100%")
                .set("height", "100%")
                .set("fill", "white"),
        )
        .add(
            Text::new(verdict)
                .set("x", LEFT)
                .set("y", 22)
                .set("font-size", 14)
                .set("fill", colour(verdict_phase)),
        );
    for (i, panel) in panels.iter().enumerate() {
        let y0 = TOP + PANEL * i as f64 + 20.0;
        let thresholds: Vec<(f64, &str)> = panel
            .conditions
            .iter()
            .filter_map(|c| threshold(c).map(|t| (t, c.as_str())))
            .collect();
        let values = panel
            .points
            .iter()
            .filter_map(|p| p.2)
            .chain(thresholds.iter().map(|t| t.0));
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        let (lo, hi) = if lo.is_finite() {
            (lo.min(0.0), if hi > lo { hi * 1.1 } else { lo + 1.0 })
        } else {
            (0.0, 1.0)
        };
        let y_of = |v: f64| y0 + PLOT_H - (v - lo) / (hi - lo) * PLOT_H;
        doc = doc
            .add(
                Text::new(panel.name)
                    .set("x", LEFT)
                    .set("y", y0 - 6.0)
                    .set("font-weight", "bold"),
            )
            .add(
                Rectangle::new()
                    .set("x", LEFT)
                    .set("y", y0)
                    .set("width", WIDTH - LEFT - RIGHT)
                    .set("height", PLOT_H)
                    .set("fill", "none")
                    .set("stroke", "#999"),
            )
            .add(
                Text::new(format!("{hi:.4}"))
                    .set("x", LEFT - 6.0)
                    .set("y", y0 + 10.0)
                    .set("text-anchor", "end"),
            )
            .add(
                Text::new(format!("{lo:.4}"))
                    .set("x", LEFT - 6.0)
                    .set("y", y0 + PLOT_H)
                    .set("text-anchor", "end"),
            )
            .add(
                Text::new(from.format("%Y-%m-%d %H:%M").to_string())
                    .set("x", LEFT)
                    .set("y", y0 + PLOT_H + 16.0),
            )
            .add(
                Text::new(end.format("%H:%M").to_string())
                    .set("x", WIDTH - RIGHT)
                    .set("y", y0 + PLOT_H + 16.0)
                    .set("text-anchor", "end"),
            );
        for (t, source) in &thresholds {
            let y = y_of(*t);
            doc = doc
                .add(
                    Line::new()
                        .set("x1", LEFT)
                        .set("x2", WIDTH - RIGHT)
                        .set("y1", y)
                        .set("y2", y)
                        .set("stroke", "#555")
                        .set("stroke-dasharray", "6 4"),
                )
                .add(
                    Text::new(source.to_string())
                        .set("x", WIDTH - RIGHT - 4.0)
                        .set("y", y - 4.0)
                        .set("text-anchor", "end")
                        .set("fill", "#555"),
                );
        }
        let line: Vec<(f64, f64)> = panel
            .points
            .iter()
            .filter_map(|(t, _, v)| v.map(|v| (x_of(*t), y_of(v))))
            .collect();
        if line.len() > 1 {
            doc = doc.add(
                Polyline::new()
                    .set("points", line)
                    .set("fill", "none")
                    .set("stroke", "#1f77b4")
                    .set("stroke-width", 1.2),
            );
        }
        for (t, phase, v) in &panel.points {
            let y = v.map_or(y0 + PLOT_H, y_of);
            doc = doc.add(
                Circle::new()
                    .set("cx", x_of(*t))
                    .set("cy", y)
                    .set("r", 3.5)
                    .set("fill", colour(*phase)),
            );
        }
        let xe = x_of(end);
        doc = doc
            .add(
                Text::new(format!("run ended: {}", verdict_phase.as_str()))
                    .set("x", xe - 4.0)
                    .set("y", y0 - 6.0)
                    .set("text-anchor", "end")
                    .set("fill", colour(verdict_phase)),
            )
            .add(
                Line::new()
                    .set("x1", xe)
                    .set("x2", xe)
                    .set("y1", y0)
                    .set("y2", y0 + PLOT_H)
                    .set("stroke", colour(verdict_phase))
                    .set("stroke-width", 2),
            );
    }
    // Legend.
    let mut x = LEFT;
    for p in Phase::ALL {
        doc = doc
            .add(
                Circle::new()
                    .set("cx", x)
                    .set("cy", 38)
                    .set("r", 4)
                    .set("fill", colour(p)),
            )
            .add(Text::new(p.as_str()).set("x", x + 7.0).set("y", 42));
        x += 100.0;
    }
    svg::save(path, &doc).map_err(|e| format!("cannot write the plot {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_thresholds_are_read_from_argo_forms() {
        assert_eq!(numeric("[0.09, 1]"), Some(0.09));
        assert_eq!(numeric("12"), Some(12.0));
        assert_eq!(numeric(r#"{"canary": {"rate": 0.5}}"#), Some(0.5));
        assert_eq!(numeric("[NaN]"), None);
        assert_eq!(threshold("result[0] < 0.02"), Some(0.02));
        assert_eq!(threshold("len(result) == 0 || result[0] >= 5"), Some(5.0));
        assert_eq!(threshold("result.pValue > 0"), None);
    }
}
