//! `rollgate dashboard`: a Grafana dashboard of a template's metrics, from the same spec as
//! the gate, so what a team looks at is what gates its releases.
//!
//! Classic dashboard JSON (Grafana's `schemaVersion` [`SCHEMA_VERSION`]) with a `datasource`
//! variable and one row per metric: a `query` metric's value with its condition's thresholds
//! drawn and its guard against `minRequests.count`; a `compare` metric's canary and stable
//! rates (or series) and requests per side; a `fleet` metric's version matrix, stragglers and
//! silent targets as tables. docs/rules.md describes the panels.

use serde_json::{json, Value};

use crate::spec::duration::format_duration;
use crate::spec::{
    CompareForm, ExpectedTargets, FleetSpec, LabelMatcher, MatchKind, Metric, MetricKind, Provider,
};

use super::fleet::{expected_matcher, quote, render_selector};
use super::Engine;

/// `schemaVersion` of the JSON: that of Grafana 12.x/13 (`defaultDashboard` of
/// `@grafana/schema` 13.2).
pub(crate) const SCHEMA_VERSION: u32 = 42;

/// The datasource every panel queries: the dashboard's `datasource` variable.
fn datasource() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

/// Lays panels out in a 24-column grid, row by row.
struct Layout {
    panels: Vec<Value>,
    next_id: u32,
    y: u32,
    x: u32,
    /// Height of the panels of the current line.
    last_h: u32,
}

impl Layout {
    fn row(&mut self, title: String) {
        self.newline();
        let id = self.id();
        self.panels.push(json!({
            "type": "row", "id": id, "title": title, "collapsed": false, "panels": [],
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
        }));
        self.y += 1;
    }

    fn panel(&mut self, mut panel: Value, w: u32, h: u32) {
        if self.x + w > 24 {
            self.newline();
        }
        panel["id"] = json!(self.id());
        panel["gridPos"] = json!({"h": h, "w": w, "x": self.x, "y": self.y});
        panel["datasource"] = datasource();
        self.panels.push(panel);
        self.x += w;
        self.last_h = h;
    }

    fn newline(&mut self) {
        if self.x > 0 {
            self.y += self.last_h;
            self.x = 0;
        }
    }

    fn id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }
}

fn target(ref_id: &str, expr: &str, legend: &str) -> Value {
    let expr = without_run_clock(expr);
    json!({"refId": ref_id, "datasource": datasource(), "expr": expr.trim(), "legendFormat": legend, "range": true})
}

fn table_target(ref_id: &str, expr: &str) -> Value {
    let expr = without_run_clock(expr);
    json!({"refId": ref_id, "datasource": datasource(), "expr": expr.trim(), "format": "table", "instant": true, "range": false})
}

/// A panel has no run: `[[run.elapsed]]` reads as a rule's window (one interval at a time,
/// as the open-ended check reads them).
fn without_run_clock(expr: &str) -> std::borrow::Cow<'_, str> {
    crate::spec::run_clock::replace_run_clock(expr, crate::spec::run_clock::NO_RUN_WINDOW)
}

/// A time series panel; `thresholds` are drawn as lines (red from each value up).
fn timeseries(title: &str, description: &str, targets: Vec<Value>, thresholds: &[f64]) -> Value {
    let mut steps = vec![json!({"color": "green", "value": null})];
    steps.extend(
        thresholds
            .iter()
            .map(|t| json!({"color": "red", "value": t})),
    );
    json!({
        "type": "timeseries",
        "title": title,
        "description": description,
        "targets": targets,
        "fieldConfig": {
            "defaults": {
                "thresholds": {"mode": "absolute", "steps": steps},
                "custom": {"thresholdsStyle": {"mode": if thresholds.is_empty() { "off" } else { "line" }}},
            },
            "overrides": [],
        },
        "options": {"legend": {"showLegend": true, "displayMode": "list", "placement": "bottom", "calcs": []},
                    "tooltip": {"mode": "multi", "sort": "none"}},
    })
}

fn table(title: &str, description: &str, targets: Vec<Value>) -> Value {
    json!({
        "type": "table",
        "title": title,
        "description": description,
        "targets": targets,
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {"showHeader": true, "cellHeight": "sm"},
        "transformations": [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": true}}},
        ],
    })
}

impl Engine {
    /// The Grafana dashboard (classic JSON model) of `metrics` of template `template`.
    pub fn dashboard(template: &str, metrics: &[Metric]) -> Value {
        let mut l = Layout {
            panels: Vec::new(),
            next_id: 0,
            y: 0,
            x: 0,
            last_h: 0,
        };
        for m in metrics {
            let Provider::Rollgate(spec) = &m.provider else {
                continue;
            };
            // Panels are PromQL against a Prometheus data source.
            if spec.backend.is_some() {
                continue;
            }
            l.row(format!("{} ({})", m.name, spec.kind.name()));
            match &spec.kind {
                MetricKind::Query(q) => {
                    let mut thresholds: Vec<f64> = [&m.success_condition, &m.failure_condition]
                        .into_iter()
                        .flatten()
                        .flat_map(|c| c.thresholds())
                        .collect();
                    thresholds.sort_by(f64::total_cmp);
                    thresholds.dedup();
                    let conditions: Vec<String> = [
                        m.success_condition
                            .as_ref()
                            .map(|c| format!("successCondition `{}`", c.source())),
                        m.failure_condition
                            .as_ref()
                            .map(|c| format!("failureCondition `{}`", c.source())),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    l.panel(
                        timeseries(
                            &format!("{}: value", m.name),
                            &format!(
                                "The gate's query; thresholds from {}.",
                                if conditions.is_empty() {
                                    "no condition".into()
                                } else {
                                    conditions.join(" and ")
                                }
                            ),
                            vec![target("A", &q.query, "value")],
                            &thresholds,
                        ),
                        if q.min_requests.is_some() { 12 } else { 24 },
                        8,
                    );
                    if let Some(g) = &q.min_requests {
                        l.panel(
                            timeseries(
                                &format!("{}: requests vs minRequests.count", m.name),
                                &format!(
                                    "minRequests.query against count {} (onInsufficient: {}).",
                                    g.count,
                                    g.on_insufficient.as_str()
                                ),
                                vec![target("A", &g.query, "requests")],
                                &[g.count],
                            ),
                            12,
                            8,
                        );
                    }
                }
                MetricKind::Compare(c) => match &c.form {
                    CompareForm::Ratio {
                        canary,
                        stable,
                        min_requests,
                        ..
                    } => {
                        let rate = |bad: &str, total: &str| {
                            format!("({}) / ({})", bad.trim(), total.trim())
                        };
                        l.panel(
                            timeseries(
                                &format!("{}: error rate, canary vs stable", m.name),
                                &format!("bad / total per side; the gate tolerates maxIncrease {} relative to stable.", c.max_increase),
                                vec![
                                    target("A", &rate(&canary.bad, &canary.total), "canary"),
                                    target("B", &rate(&stable.bad, &stable.total), "stable"),
                                ],
                                &[],
                            ),
                            12,
                            8,
                        );
                        l.panel(
                            timeseries(
                                &format!("{}: requests per side vs minRequests", m.name),
                                "compare.canary.total and compare.stable.total against minRequests.",
                                vec![target("A", &canary.total, "canary"), target("B", &stable.total, "stable")],
                                &[*min_requests as f64],
                            ),
                            12,
                            8,
                        );
                    }
                    CompareForm::Distribution { canary, stable, .. } => l.panel(
                        timeseries(
                            &format!("{}: canary vs stable", m.name),
                            "The two series the gate compares.",
                            vec![target("A", canary, "canary"), target("B", stable, "stable")],
                            &[],
                        ),
                        24,
                        8,
                    ),
                    CompareForm::Histogram { canary, stable, .. } => {
                        let q = |p: f64, side: &str| {
                            format!("histogram_quantile({p}, {})", side.trim())
                        };
                        l.panel(
                            timeseries(
                                &format!("{}: latency p50 and p99, canary vs stable", m.name),
                                "From the bucket counts the gate compares (its test uses every request, not these quantiles).",
                                vec![
                                    target("A", &q(0.5, canary), "canary p50"),
                                    target("B", &q(0.5, stable), "stable p50"),
                                    target("C", &q(0.99, canary), "canary p99"),
                                    target("D", &q(0.99, stable), "stable p99"),
                                ],
                                &[],
                            ),
                            24,
                            8,
                        );
                    }
                },
                MetricKind::Fleet(f) => fleet_panels(&mut l, &m.name, f),
            }
        }
        json!({
            "title": format!("rollgate: {template}"),
            "uid": uid(template),
            "tags": ["rollgate"],
            "editable": true,
            "schemaVersion": SCHEMA_VERSION,
            "time": {"from": "now-6h", "to": "now"},
            "refresh": "1m",
            "annotations": {"list": []},
            "templating": {"list": [{
                "name": "datasource", "label": "Prometheus", "type": "datasource",
                "query": "prometheus", "refresh": 1, "hide": 0, "regex": "", "options": [],
            }]},
            "panels": l.panels,
        })
    }
}

fn fleet_panels(l: &mut Layout, name: &str, f: &FleetSpec) {
    let g = &f.group_by;
    let v = &f.version.label;
    let s = &f.selector;
    l.panel(
        table(
            &format!("{name}: version matrix"),
            &format!("Per {v}: how many {g} targets and how many series (containers) run it now."),
            vec![
                table_target("A", &format!("count by ({v}) (count by ({g}, {v}) ({s}))")),
                table_target("B", &format!("count by ({v}) ({s})")),
            ],
        ),
        24,
        8,
    );
    let (op, value) = expected_matcher(&f.version.expected);
    let mut matchers = f.series.matchers.clone();
    matchers.push(LabelMatcher {
        name: v.clone(),
        op: match op {
            MatchKind::Equal => MatchKind::NotEqual,
            _ => MatchKind::NotRegex,
        },
        value,
    });
    let old = render_selector(f.series.metric.as_deref(), &matchers);
    l.panel(
        table(
            &format!("{name}: stragglers"),
            &format!(
                "Targets with series on a {v} other than {}.",
                f.version.expected.describe()
            ),
            vec![table_target("A", &format!("count by ({g}, {v}) ({old})"))],
        ),
        12,
        8,
    );
    let ms = format_duration(f.max_staleness);
    let seen = format!("count by ({g}) (last_over_time({s}[{ms}]))");
    let (query, what) = match &f.expected_targets {
        ExpectedTargets::Query(q) => (
            format!("count by ({g}) ({q}) unless on ({g}) {seen}"),
            "Expected targets (expectedTargetsQuery)",
        ),
        ExpectedTargets::List(list) => (
            list.iter()
                .map(|t| {
                    format!(
                        "label_replace(vector(1), {}, {}, \"\", \"\")",
                        quote(g),
                        quote(t)
                    )
                })
                .collect::<Vec<_>>()
                .join(" or ")
                + &format!(" unless on ({g}) {seen}"),
            "Expected targets (expectedTargets)",
        ),
        ExpectedTargets::Reporting => (
            format!(
                "count by ({g}) (last_over_time({s}[{}])) unless on ({g}) {seen}",
                format_duration(f.max_staleness * 4)
            ),
            "Targets seen in the last 4 x maxStaleness",
        ),
    };
    l.panel(
        table(
            &format!("{name}: silent targets"),
            &format!("{what} with no sample of the selector in the last {ms} (maxStaleness): the gate counts them as silent."),
            vec![table_target("A", &query)],
        ),
        12,
        8,
    );
}

/// A dashboard uid: at most 40 of `a-zA-Z0-9-_`.
fn uid(template: &str) -> String {
    let text: String = format!("rollgate-{template}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    text.chars().take(40).collect()
}
