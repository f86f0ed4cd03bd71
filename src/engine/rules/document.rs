//! The PrometheusRule objects `rollgate rules` prints, with where they go and how often their
//! group is evaluated.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::spec::duration::format_duration;
use crate::spec::FleetSpec;

use super::super::{Engine, RulePlacement};
use super::MetricRules;

/// `apiVersion` of the objects (prometheus-operator's PrometheusRule).
pub const RULE_API_VERSION: &str = "monitoring.coreos.com/v1";

/// Where the objects go and their groups' evaluation interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleOptions {
    /// Namespace and labels of the objects.
    pub placement: RulePlacement,
    /// `interval` of every rule group; none: Prometheus' `evaluation_interval`.
    pub group_interval: Option<Duration>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    spec: Spec,
}

#[derive(Serialize)]
struct Meta {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Spec {
    groups: Vec<Group>,
}

#[derive(Serialize)]
struct Group {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    rules: Vec<Rule>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Rule {
    Record {
        record: String,
        expr: String,
    },
    Alert {
        alert: String,
        expr: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
}

impl Engine {
    /// The PrometheusRule (YAML) of a `query` or `compare` metric's rules.
    pub fn metric_prometheus_rule(
        rules: &MetricRules,
        options: &RuleOptions,
    ) -> Result<String, String> {
        let mut labels = BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_string(),
            "rollgate".to_string(),
        )]);
        labels.extend(options.placement.labels.iter().cloned());
        let mut items: Vec<Rule> = rules
            .records
            .iter()
            .map(|r| Rule::Record {
                record: r.record.clone(),
                expr: r.expr.clone(),
            })
            .collect();
        items.extend(rules.alerts.iter().map(|a| Rule::Alert {
            alert: a.alert.clone(),
            expr: a.expr.clone(),
            labels: a.labels.clone(),
            annotations: a.annotations.clone(),
        }));
        let object = Object {
            api_version: RULE_API_VERSION,
            kind: "PrometheusRule",
            metadata: Meta {
                name: object_name(&rules.template, &rules.metric),
                namespace: options.placement.namespace.clone(),
                labels,
            },
            spec: Spec {
                groups: vec![Group {
                    name: format!(
                        "rollgate.{}.{}.{}",
                        rules.kind, rules.template, rules.metric
                    ),
                    interval: options.group_interval.map(format_duration),
                    rules: items,
                }],
            },
        };
        serde_yaml_ng::to_string(&object).map_err(|e| format!("cannot write the rule as YAML: {e}"))
    }

    /// The fleet generator's PrometheusRule with the groups' `interval` set.
    pub fn fleet_rule_with_options(
        template: &str,
        metric: &str,
        spec: &FleetSpec,
        options: &RuleOptions,
    ) -> Result<String, String> {
        let text = Engine::fleet_prometheus_rule(template, metric, spec, &options.placement)?;
        let Some(interval) = options.group_interval else {
            return Ok(text);
        };
        let mut value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| format!("cannot read the fleet rule back: {e}"))?;
        if let Some(groups) = value
            .get_mut("spec")
            .and_then(|s| s.get_mut("groups"))
            .and_then(|g| g.as_sequence_mut())
        {
            for g in groups {
                if let Some(map) = g.as_mapping_mut() {
                    map.insert("interval".into(), format_duration(interval).into());
                }
            }
        }
        serde_yaml_ng::to_string(&value).map_err(|e| format!("cannot write the rule as YAML: {e}"))
    }
}

/// A Kubernetes object name: `rollgate-<template>-<metric>`, lower case alphanumerics, `-`
/// and `.`, at most 253 characters.
fn object_name(template: &str, metric: &str) -> String {
    let text = if template.starts_with("rollgate") {
        format!("{template}-{metric}")
    } else {
        format!("rollgate-{template}-{metric}")
    };
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let cut: String = out.trim_matches(['-', '.']).chars().take(253).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}
