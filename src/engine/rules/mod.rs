//! `rollgate rules` for every kind: recording rules for a metric's queries and alerts that
//! fire when its verdict would be Failed, from the same spec the gate reads.
//!
//! `query` metrics translate their conditions ([`crate::condition::Filter`]) where PromQL has
//! an equivalent; `compare` ratio metrics get the alerting approximation of the exact test;
//! fleet metrics use the fleet generator ([`Engine::fleet_prometheus_rule`]). What cannot be
//! translated is said, per metric, in [`MetricRules::notes`]. docs/rules.md explains each form
//! and where an alert is exact.

mod compare;
pub(crate) mod document;
mod query;
mod series;

pub use document::{RuleError, RuleOptions, RulePlacement, RULE_API_VERSION};
pub use series::{shape, Shape};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::spec::{Metric, MetricSpec};
use crate::spec::{MetricKind, Provider};

use super::Engine;

/// A recording rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// The recorded series' name (`rollgate:<template>_<metric>:<what>`).
    pub record: String,
    /// The PromQL it records.
    pub expr: String,
}

/// An alerting rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The alert's name.
    pub alert: String,
    /// The PromQL that fires it.
    pub expr: String,
    /// How long the expression must hold before the alert fires; none: as soon as it returns
    /// a series (every `query` and `compare` alert).
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// The alert's labels.
    pub labels: BTreeMap<String, String>,
    /// The alert's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The rules of one `query` or `compare` metric.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRules {
    /// The template's name.
    pub template: String,
    /// The metric's name.
    pub metric: String,
    /// `query` or `compare`.
    pub kind: &'static str,
    /// Its recording rules.
    pub records: Vec<Record>,
    /// Its alerting rules.
    pub alerts: Vec<Alert>,
    /// What was not translated, or only approximated, and why (one sentence each).
    pub notes: Vec<String>,
    /// The alerts fire exactly when the gate's verdict is Failed (docs/rules.md says when).
    pub exact: bool,
}

impl MetricRules {
    fn new(template: &str, metric: &str, kind: &'static str) -> MetricRules {
        MetricRules {
            template: template.into(),
            metric: metric.into(),
            kind,
            records: Vec::new(),
            alerts: Vec::new(),
            notes: Vec::new(),
            exact: true,
        }
    }

    /// The name of the recorded series `what` of this metric.
    fn record_name(&self, what: &str) -> String {
        format!(
            "rollgate:{}_{}:{what}",
            metric_name_part(&self.template),
            metric_name_part(&self.metric)
        )
    }

    /// Adds a recording rule and returns its series name.
    fn record(&mut self, what: &str, expr: &str) -> String {
        let record = self.record_name(what);
        // A rule has no run: the run clock reads as the window an alert looks back over.
        let expr =
            crate::spec::run_clock::replace_run_clock(expr, crate::spec::run_clock::NO_RUN_WINDOW);
        self.records.push(Record {
            record: record.clone(),
            expr: expr.trim().to_string(),
        });
        record
    }

    fn alert(&mut self, alert: &str, expr: String, summary: String) {
        let labels = BTreeMap::from([
            ("severity".to_string(), "critical".to_string()),
            ("rollgate_template".to_string(), self.template.clone()),
            ("rollgate_metric".to_string(), self.metric.clone()),
        ]);
        let annotations = BTreeMap::from([
            ("summary".to_string(), summary),
            (
                "description".to_string(),
                format!(
                    "The rollgate gate {}/{} would measure Failed now (value {{{{ $value }}}}).",
                    self.template, self.metric
                ),
            ),
        ]);
        self.alerts.push(Alert {
            alert: alert.into(),
            expr,
            for_: None,
            labels,
            annotations,
        });
    }

    /// `expr` with every recorded series replaced by its expression, for evaluating an alert
    /// as one instant query where the recording rules do not run.
    pub fn inline(&self, expr: &str) -> String {
        // Later records use earlier ones: replacing from the last one back leaves none.
        self.records.iter().rev().fold(expr.to_string(), |text, r| {
            replace_name(&text, &r.record, &format!("({})", r.expr))
        })
    }
}

/// `text` with every whole occurrence of metric name `name` replaced by `with`.
fn replace_name(text: &str, name: &str, with: &str) -> String {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(name) {
        let before = if i > 0 {
            rest[..i].chars().last()
        } else {
            out.chars().last()
        };
        let after = rest[i + name.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_name_char) || after.is_some_and(is_name_char) {
            out.push_str(name);
        } else {
            out.push_str(with);
        }
        rest = &rest[i + name.len()..];
    }
    out.push_str(rest);
    out
}

/// Characters allowed in a metric name part (`[a-zA-Z0-9_]`); others become `_`.
fn metric_name_part(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// What `rollgate rules` makes of one metric.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricOutput {
    /// Recording and alerting rules of a `query` or `compare` metric.
    Rules(MetricRules),
    /// A fleet metric: its PrometheusRule comes from the fleet generator.
    Fleet,
    /// Not a rollgate metric, or with a condition that does not compile: why.
    Skipped(String),
}

impl Engine {
    /// The PrometheusRule (YAML) of a `query` or `compare` metric's rules.
    pub fn metric_prometheus_rule(
        rules: &MetricRules,
        options: &RuleOptions,
    ) -> Result<String, RuleError> {
        let items = (rules.records.iter().map(document::Rule::Record))
            .chain(rules.alerts.iter().map(document::Rule::Alert))
            .collect();
        document::prometheus_rule(rules.kind, &rules.template, &rules.metric, items, options)
    }

    /// The rules of `metric` of template `template`.
    pub fn metric_rules(template: &str, metric: &Metric) -> MetricOutput {
        let spec: &MetricSpec = match &metric.provider {
            Provider::Rollgate(spec) => spec,
            Provider::Prometheus { .. } => {
                return MetricOutput::Skipped(
                    "Argo's built-in prometheus provider: rules are made for rollgate metrics (its no-data and guard rules differ)".into(),
                )
            }
            Provider::Unsupported(name) => {
                return MetricOutput::Skipped(format!("provider {name} is not rollgate's"))
            }
        };
        if let Some(broken) = &metric.broken_condition {
            return MetricOutput::Skipped(format!(
                "{broken}: the gate measures Error, never Failed"
            ));
        }
        if let Some(backend) = &spec.backend {
            return MetricOutput::Skipped(format!(
                "queries {}: recording and alerting rules are PromQL, made for metrics with a prometheus block only",
                backend.name()
            ));
        }
        match &spec.kind {
            MetricKind::Query(q) => {
                MetricOutput::Rules(query::rules(template, metric, q, spec.no_data))
            }
            MetricKind::Compare(c) => {
                MetricOutput::Rules(compare::rules(template, &metric.name, c, spec.no_data))
            }
            MetricKind::Fleet(_) => MetricOutput::Fleet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_replaces_records_of_records_and_whole_names_only() {
        let mut r = MetricRules::new("t", "m", "compare");
        let total = r.record("canary", "sum(b)");
        let rate = r.record("canary_rate", &format!("sum(a) / {total}"));
        assert_eq!(
            r.inline(&format!("{rate} > 0 and {total} > 1")),
            "(sum(a) / (sum(b))) > 0 and (sum(b)) > 1"
        );
    }
}
