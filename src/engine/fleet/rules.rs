//! `rollgate rules`: a PrometheusRule whose alerts use the gate's own definition of "done".
//!
//! The selectors, staleness window, version matcher, workload conditions and exceptions come
//! from [`super::promql`], as for the gate. Alerts: an expected target silent for
//! `maxStaleness`; a workload stalled for 15 minutes (with `workloads: true`); an old version
//! still present after `completionDeadline` (when given).

use std::collections::BTreeMap;

use crate::engine::rules::document::{prometheus_rule, Rule};
use crate::engine::rules::{Alert, RuleError, RuleOptions};
use crate::engine::Engine;
use crate::spec::duration::format_duration;
use crate::spec::{ExpectedTargets, FleetSpec, LabelMatcher, MatchKind};

use super::promql::{
    allowed_matcher, expected_matcher, expected_series, first_seen_query, held_queries,
    init_selector, live_selector, other_series, quote, render_selector, stall_query,
    stalled_per_target, wrap, StallKind,
};

/// How long a workload must stay stalled before its alert fires.
const STALL_FOR: &str = "15m";

impl Engine {
    /// The PrometheusRule (monitoring.coreos.com/v1, as YAML) with the alerts of fleet metric
    /// `metric` of template `template`.
    pub fn fleet_prometheus_rule(
        template: &str,
        metric: &str,
        spec: &FleetSpec,
        options: &RuleOptions,
    ) -> Result<String, RuleError> {
        let alerts = alerts(template, metric, spec);
        let rules = alerts.iter().map(Rule::Alert).collect();
        prometheus_rule("fleet", template, metric, rules, options)
    }
}

/// The fleet metric's alerts.
fn alerts(template: &str, metric: &str, spec: &FleetSpec) -> Vec<Alert> {
    let g = &spec.group_by;
    let target = format!("{{{{ $labels.{g} }}}}");
    let labels = |severity: &str| {
        BTreeMap::from([
            ("severity".to_string(), severity.to_string()),
            ("rollgate_template".to_string(), template.to_string()),
            ("rollgate_metric".to_string(), metric.to_string()),
        ])
    };
    let annotations = |summary: String, description: String| {
        BTreeMap::from([
            ("summary".to_string(), summary),
            ("description".to_string(), description),
        ])
    };
    let gate = format!("the rollgate fleet gate {template}/{metric}");
    let mut rules = Vec::new();

    if let Some(inventory) = inventory(spec) {
        let ms = format_duration(spec.max_staleness);
        rules.push(Alert {
            alert: "RollgateFleetTargetSilent".into(),
            expr: excuse(
                spec,
                format!(
                    "{inventory} unless on ({g}) count by ({g}) (last_over_time({}[{ms}]))",
                    spec.selector
                ),
            ),
            for_: None,
            labels: labels("warning"),
            annotations: annotations(
                format!("{target} has not reported for {ms}"),
                format!("Expected target {target} has no sample of the fleet selector in the last {ms}; {gate} counts it as silent and fails."),
            ),
        });
    }

    if spec.workloads {
        let stalls: Vec<String> = StallKind::ALL
            .iter()
            .filter(|k| k.fails())
            .map(|k| {
                format!(
                    "label_replace({}, \"stall\", {}, \"\", \"\")",
                    stall_query(spec, *k),
                    quote(k.key())
                )
            })
            .collect();
        rules.push(Alert {
            alert: "RollgateFleetWorkloadStalled".into(),
            expr: excuse(spec, stalls.join(" or ")),
            for_: Some(STALL_FOR.into()),
            labels: labels("warning"),
            annotations: annotations(
                format!("{{{{ $labels.namespace }}}}/{{{{ $labels.daemonset }}}}{{{{ $labels.deployment }}}}{{{{ $labels.statefulset }}}} in {target} stalled ({{{{ $labels.stall }}}})"),
                format!("A workload in {target} has not finished its rollout for {STALL_FOR} ({{{{ $labels.stall }}}}, lag {{{{ $value }}}}); {gate} fails while it lasts."),
            ),
        });
    }

    if let Some(deadline) = spec.completion_deadline {
        let deadline = format_duration(deadline);
        rules.push(Alert {
            alert: "RollgateFleetOldVersionPastDeadline".into(),
            expr: excuse(spec, old_version_expr(spec)),
            for_: Some(deadline.clone()),
            labels: labels("critical"),
            annotations: annotations(
                format!("{target} still runs a version other than {} after {deadline}", spec.version.expected.describe()),
                format!("{{{{ $value }}}} containers in {target} have run another {} than the expected one for {deadline} (completionDeadline); {gate} fails until they are replaced.", spec.version.label),
            ),
        });
    }

    if !spec.version.supported.is_empty() {
        let v = &spec.version;
        let (_, allowed) = allowed_matcher(v);
        let mut matchers = spec.series.matchers.clone();
        matchers.push(LabelMatcher {
            name: v.label.clone(),
            op: MatchKind::NotRegex,
            value: allowed,
        });
        let outside = render_selector(spec.series.metric.as_deref(), &matchers);
        let label = &v.label;
        rules.push(Alert {
            alert: "RollgateFleetUnsupportedVersion".into(),
            expr: excuse(
                spec,
                format!(
                    "count by ({g}, {label}) ({})",
                    live_selector(spec, &outside)
                ),
            ),
            for_: Some(STALL_FOR.into()),
            labels: labels("critical"),
            annotations: annotations(
                format!("{target} runs {{{{ $labels.{label} }}}}, outside the support window"),
                format!("{{{{ $value }}}} containers in {target} run {{{{ $labels.{label} }}}}, neither the expected version {} nor a supported one (version.supported); {gate} counts {target} as a straggler.", v.expected.describe()),
            ),
        });
    }

    for (i, tier) in spec.promotion.completion.iter().enumerate() {
        let Some(inventory) = inventory(spec) else {
            break;
        };
        // As the spec wrote it, as in the gate's message.
        let within = if tier.within_text.is_empty() {
            format_duration(tier.within)
        } else {
            tier.within_text.clone()
        };
        let share = crate::engine::result::format_number(tier.share);
        let start = match spec.promotion.started_at {
            Some(t) => t.timestamp().to_string(),
            None => format!("scalar({})", first_seen_query(spec)),
        };
        let held = spec
            .promotion
            .hold_for
            .map(|h| format!(" (for all of holdFor {})", format_duration(h)))
            .unwrap_or_default();
        rules.push(Alert {
            alert: format!("RollgateFleetCompletionTier{}", i + 1),
            expr: format!(
                "({} < {share}) and on () ((vector(time()) - {start}) > {})",
                done_share(spec, &inventory),
                tier.within.as_secs()
            ),
            for_: None,
            labels: labels("critical"),
            annotations: annotations(
                format!("the fleet missed completion tier {} ({share} within {within})", i + 1),
                format!("Only {{{{ $value | humanizePercentage }}}} of the expected targets run the expected version{held} {within} after the rollout's start (tier {}: {share}); {gate} fails until the share is reached.", i + 1),
            ),
        });
    }

    rules
}

/// The expected targets as a vector with one series per target; `None` when the inventory is
/// whatever reports (then silence cannot be detected, in alerts as in the gate).
fn inventory(spec: &FleetSpec) -> Option<String> {
    let g = &spec.group_by;
    match &spec.expected_targets {
        ExpectedTargets::List(list) => Some(balanced_or(
            &list
                .iter()
                .map(|t| {
                    format!(
                        "label_replace(vector(1), {}, {}, \"\", \"\")",
                        quote(g),
                        quote(t)
                    )
                })
                .collect::<Vec<_>>(),
        )),
        ExpectedTargets::Query(q) => Some(format!("count by ({g}) ({q})")),
        ExpectedTargets::Reporting => None,
    }
}

/// The share of the inventory done, as the gate's completion tiers count it: reporting with
/// every series on the expected version, no stalled workload (with `workloads`) and, with
/// `holdFor`, current at every step of that window (the gate's own held query); or under an
/// exception.
fn done_share(spec: &FleetSpec, inventory: &str) -> String {
    let g = &spec.group_by;
    let mut done = format!(
        "count by ({g}) ({}) unless on ({g}) count by ({g}) ({})",
        live_selector(spec, &expected_series(spec)),
        live_selector(spec, &other_series(spec, false))
    );
    if let Some(stalled) = stalled_per_target(spec) {
        done = format!("({done}) unless on ({g}) {stalled}");
    }
    if let Some(h) = spec.promotion.hold_for {
        let held = held_queries(spec, h);
        done = format!("({done}) and on ({g}) ({} >= {})", held.steps, held.needed);
    }
    if let Some(excepted) = excepted_now(spec) {
        done = format!("({done}) or ({excepted})");
    }
    format!("(count({inventory} and on ({g}) ({done})) or vector(0)) / scalar(count({inventory}))")
}

/// The targets under an exception now, one series each; `None` without exceptions.
fn excepted_now(spec: &FleetSpec) -> Option<String> {
    if spec.exceptions.is_empty() {
        return None;
    }
    let g = &spec.group_by;
    let excused: Vec<String> = spec
        .exceptions
        .iter()
        .map(|e| {
            format!(
                "label_replace(vector(time()), {}, {}, \"\", \"\") < {}",
                quote(g),
                quote(&e.target),
                e.until.timestamp()
            )
        })
        .collect();
    Some(balanced_or(&excused))
}

/// Leaves out targets under an exception; each exception stops applying at its `until` by
/// itself (`time() < until`), as in the gate.
fn excuse(spec: &FleetSpec, expr: String) -> String {
    match excepted_now(spec) {
        None => expr,
        Some(excused) => format!("({expr}) unless on ({}) ({excused})", spec.group_by),
    }
}

/// Containers on another version (or without a version label), per target; pods in a
/// terminal phase are left out as in the gate.
fn old_version_expr(spec: &FleetSpec) -> String {
    let g = &spec.group_by;
    let not_expected = |v: &crate::spec::VersionSpec| {
        let (op, value) = expected_matcher(&v.expected);
        LabelMatcher {
            name: v.label.clone(),
            op: match op {
                MatchKind::Equal => MatchKind::NotEqual,
                _ => MatchKind::NotRegex,
            },
            value,
        }
    };
    let old = other_series(spec, false);
    let main = format!("count by ({g}) ({})", live_selector(spec, &old));
    if !spec.include_init_containers {
        return main;
    }
    // The init selector with the (first) version matcher added.
    let ne = not_expected(&spec.version);
    let init = init_selector(spec);
    let init_old = match init.strip_suffix('}') {
        Some(head) => format!(
            "{head}, {}{}{}}}",
            ne.name,
            ne.op.as_str(),
            quote(&ne.value)
        ),
        None => format!(
            "{init}{{{}{}{}}}",
            ne.name,
            ne.op.as_str(),
            quote(&ne.value)
        ),
    };
    let on: Vec<&str> = [g.as_str(), "namespace", "pod"]
        .into_iter()
        .enumerate()
        .filter(|(i, l)| *i == 0 || *l != g)
        .map(|(_, l)| l)
        .collect();
    let live = wrap(&live_selector(spec, &spec.selector));
    format!(
        "{main} or count by ({g}) ({init_old} and on ({}) {live})",
        on.join(", "),
    )
}

/// `(a or b) or (c or d)`: a shallow tree, so thousands of targets do not nest thousands deep.
fn balanced_or(items: &[String]) -> String {
    match items {
        [] => "vector(0) < 0".into(),
        [one] => one.clone(),
        _ => {
            let (left, right) = items.split_at(items.len() / 2);
            format!("({} or {})", balanced_or(left), balanced_or(right))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(extra: serde_json::Value) -> FleetSpec {
        let mut v = json!({
            "selector": "kube_pod_container_info{namespace=\"monitoring\", container=\"node-agent\"}",
            "version": {"expected": "sha256:35c1e11408120e3942e771102f0172aee75829d3a87f9f5909d53b5f40bfc814"},
            "expectedTargets": ["edge-01", "edge-02", "edge-03"],
            "workloads": true,
            "includeInitContainers": true,
            "completionDeadline": "7d",
            "exceptions": [{"target": "edge-07", "reason": "r", "until": "2026-12-31"}],
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        FleetSpec::from_value(&v, "fleet").unwrap()
    }

    #[test]
    fn every_expression_parses() {
        let rules = alerts("t", "m", &spec(json!({})));
        assert_eq!(rules.len(), 3);
        for r in &rules {
            crate::spec::check_promql(&r.alert, &r.expr).unwrap();
        }
        assert!(rules[0].expr.contains("< 1798761600"), "{}", rules[0].expr);
        assert_eq!(rules[2].for_.as_deref(), Some("1w"));
        assert!(
            rules[2].expr.contains("image_id!~\"(?:.*@)?sha256:35c1"),
            "{}",
            rules[2].expr
        );
    }

    #[test]
    fn reporting_inventory_has_no_silence_alert() {
        let f = spec(json!({"expectedTargets": "reporting", "workloads": false}));
        let rules = alerts("t", "m", &f);
        let names: Vec<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
        assert_eq!(names, vec!["RollgateFleetOldVersionPastDeadline"]);
    }

    #[test]
    fn balanced_or_stays_shallow() {
        let items: Vec<String> = (0..1000).map(|i| format!("x{i}")).collect();
        let text = balanced_or(&items);
        let mut depth = 0i32;
        let mut max = 0;
        for c in text.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            max = max.max(depth);
        }
        assert!(max <= 10, "{max}");
    }
}
