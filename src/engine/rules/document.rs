//! The one PrometheusRule model: the object `rollgate rules` prints for every kind (`query`,
//! `compare`, `fleet`), with where it goes and how often its group is evaluated.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::spec::duration::format_duration;

use super::{Alert, Record};

/// `apiVersion` of the objects (prometheus-operator's PrometheusRule).
pub const RULE_API_VERSION: &str = "monitoring.coreos.com/v1";

/// Where the PrometheusRule goes: its namespace and the extra labels a prometheus-operator
/// `ruleSelector` / `ruleNamespaceSelector` picks it up by (kube-prometheus-stack selects
/// `release: <its release name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulePlacement {
    /// `metadata.namespace`; none: whatever namespace it is applied to.
    pub namespace: Option<String>,
    /// Extra `metadata.labels`.
    pub labels: Vec<(String, String)>,
}

/// Where the objects go and their groups' evaluation interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleOptions {
    /// Namespace and labels of the objects.
    pub placement: RulePlacement,
    /// `interval` of every rule group; none: Prometheus' `evaluation_interval`.
    pub group_interval: Option<Duration>,
}

/// Why a PrometheusRule could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The YAML writer refused the object.
    #[error("cannot write the rule as YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// One rule of a group, as the YAML has it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Rule<'a> {
    /// A recording rule.
    Record(&'a Record),
    /// An alerting rule.
    Alert(&'a Alert),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PrometheusRule<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Meta,
    spec: Spec<'a>,
}

#[derive(Serialize)]
struct Meta {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    labels: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Spec<'a> {
    groups: Vec<Group<'a>>,
}

#[derive(Serialize)]
struct Group<'a> {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<String>,
    rules: Vec<Rule<'a>>,
}

/// The PrometheusRule (YAML) `rollgate-<template>-<metric>` with one group,
/// `rollgate.<kind>.<template>.<metric>`, of `rules`.
pub(crate) fn prometheus_rule(
    kind: &str,
    template: &str,
    metric: &str,
    rules: Vec<Rule<'_>>,
    options: &RuleOptions,
) -> Result<String, RuleError> {
    let mut labels = BTreeMap::from([(
        "app.kubernetes.io/managed-by".to_string(),
        "rollgate".to_string(),
    )]);
    labels.extend(options.placement.labels.iter().cloned());
    let object = PrometheusRule {
        api_version: RULE_API_VERSION,
        kind: "PrometheusRule",
        metadata: Meta {
            name: object_name(template, metric),
            namespace: options.placement.namespace.clone(),
            labels,
        },
        spec: Spec {
            groups: vec![Group {
                name: format!("rollgate.{kind}.{template}.{metric}"),
                interval: options.group_interval.map(format_duration),
                rules,
            }],
        },
    };
    Ok(serde_yaml_ng::to_string(&object)?)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_kubernetes_names() {
        assert_eq!(
            object_name("rollgate-Fleet Gate_x", "node-agent"),
            "rollgate-fleet-gate-x-node-agent"
        );
        assert_eq!(object_name("web", "Error Rate"), "rollgate-web-error-rate");
    }
}
