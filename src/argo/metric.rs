//! The one parser from Argo's metric (as the controller or a gRPC caller sends it) to the
//! engine's [`Metric`], and the cache (a provider's) that keeps repeated metrics from being
//! parsed again.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::{ArgoMetric, IntOrString};
use crate::spec::{Metric, MetricSpec, SpecError};

/// How many parsed metrics a [`MetricCache`] keeps; past it the cache starts over.
const METRIC_CACHE_SIZE: usize = 4096;

/// Parsed metrics by their wire form less the name (metrics of many runs share a spec). The
/// controller sends the same metric at every interval, and parsing it (PromQL, regexes,
/// conditions) costs more than the whole protocol.
#[derive(Default)]
pub(crate) struct MetricCache {
    parsed: Mutex<HashMap<ArgoMetric, Result<Arc<Metric>, SpecError>>>,
}

impl fmt::Debug for MetricCache {
    /// The cached specs may hold substituted secrets: only their number is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.parsed.lock().map(|c| c.len()).unwrap_or(0);
        f.debug_struct("MetricCache").field("len", &len).finish()
    }
}

impl MetricCache {
    /// How many wire forms are cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.parsed.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// The engine's metric for `metric` ([`metric_from_argo`]), parsed once per wire form.
    pub(crate) fn get(&self, metric: &ArgoMetric) -> Result<Arc<Metric>, SpecError> {
        let key = ArgoMetric {
            name: String::new(),
            ..metric.clone()
        };
        let cached = self.parsed.lock().ok().and_then(|c| c.get(&key).cloned());
        let parsed = match cached {
            Some(hit) => hit,
            None => {
                let parsed = metric_from_argo(&key).map(Arc::new);
                if let Ok(mut c) = self.parsed.lock() {
                    if c.len() >= METRIC_CACHE_SIZE {
                        c.clear();
                    }
                    c.insert(key, parsed.clone());
                }
                parsed
            }
        };
        parsed.map(|m| {
            let mut named = Metric::clone(&m);
            named.name.clone_from(&metric.name);
            Arc::new(named)
        })
    }
}

/// Builds the engine's metric from the controller's: the single `provider.plugin` entry, whatever
/// its key, plus Argo's conditions, interval and count.
fn metric_from_argo(metric: &ArgoMetric) -> Result<Metric, SpecError> {
    let mut entries = metric.plugin.iter();
    let (key, config) = match (entries.next(), entries.next()) {
        (Some(entry), None) => entry,
        _ => {
            return Err(SpecError::Conflict {
                path: "provider.plugin".into(),
                message: format!(
                    "expected exactly one plugin entry, found {}",
                    metric.plugin.len()
                ),
            })
        }
    };
    let value: Value = serde_json::from_slice(config).map_err(|e| SpecError::Syntax {
        source_name: format!("provider.plugin.{key}"),
        message: format!("not valid JSON: {e}"),
    })?;
    let spec = MetricSpec::from_value(&value, &format!("provider.plugin.{key}"))?;
    Metric::from_plugin(&metric.name, &argo_fields(metric), spec)
}

/// The metric's Argo fields in their JSON form, for the reader templates use. Unset fields
/// (Go's zero values on the wire) are left out. The run limits are not passed: the controller
/// enforces them itself, reading them leniently (`IntValue()`), so the plugin must not refuse
/// a metric over them.
fn argo_fields(metric: &ArgoMetric) -> Value {
    let mut fields = Map::new();
    for (key, text) in [
        ("interval", metric.interval.trim()),
        ("initialDelay", metric.initial_delay.trim()),
        ("successCondition", metric.success_condition.as_str()),
        ("failureCondition", metric.failure_condition.as_str()),
    ] {
        if !text.is_empty() {
            fields.insert(key.to_string(), Value::String(text.to_string()));
        }
    }
    match &metric.count {
        Some(IntOrString::Int(n)) => fields.insert("count".to_string(), Value::from(*n)),
        Some(IntOrString::Str(s)) => fields.insert("count".to_string(), Value::String(s.clone())),
        None => None,
    };
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn with_count(count: Option<IntOrString>) -> ArgoMetric {
        let spec = br#"{"prometheus":{"address":"http://127.0.0.1:9"},"query":"vector(1)","noData":"error"}"#;
        ArgoMetric {
            name: "m".into(),
            count,
            plugin: BTreeMap::from([("rollgate/analysis".to_string(), spec.to_vec())]),
            ..ArgoMetric::default()
        }
    }

    /// The plugin surfaces and templates read Argo's fields by one rule, so the same
    /// fields give the same metric (or the same error) on both.
    #[test]
    fn plugin_and_template_read_argo_fields_alike() {
        let spec = r#"{"prometheus":{"address":"http://127.0.0.1:9"},"query":"vector(1)","noData":"error"}"#;
        let cases: [(&str, &str, Option<IntOrString>, &str); 5] = [
            ("90s", "5m", Some(IntOrString::Int(3)), "result[0] < 1"),
            ("", "", Some(IntOrString::Str("4".into())), ""),
            ("1m", "", None, "result[0] <"),
            ("1m", "", None, " "),
            ("soon", "", None, ""),
        ];
        for (interval, delay, count, success) in cases {
            let argo = ArgoMetric {
                interval: interval.into(),
                initial_delay: delay.into(),
                success_condition: success.into(),
                ..with_count(count.clone())
            };
            let mut template = serde_json::json!({
                "name": "m",
                "provider": {"plugin": {"rollgate/analysis": serde_json::from_str::<Value>(spec).unwrap()}},
            });
            for (key, text) in [
                ("interval", interval),
                ("initialDelay", delay),
                ("successCondition", success),
            ] {
                if !text.is_empty() {
                    template[key] = Value::from(text);
                }
            }
            match &count {
                Some(IntOrString::Int(n)) => template["count"] = Value::from(*n),
                Some(IntOrString::Str(s)) => template["count"] = Value::from(s.as_str()),
                None => {}
            }
            let plugin = metric_from_argo(&argo);
            let from_template = Metric::from_value(&template, "");
            match (plugin, from_template) {
                (Ok(p), Ok(t)) => {
                    assert_eq!(p.interval, t.interval, "{interval}");
                    assert_eq!(p.initial_delay, t.initial_delay, "{delay}");
                    assert_eq!(p.count, t.count, "{count:?}");
                    assert_eq!(p.success_condition.is_some(), t.success_condition.is_some());
                    assert!(t.broken_condition.is_none() && p.broken_condition.is_none());
                }
                (Err(p), Err(t)) => assert_eq!(p.to_string(), t.to_string()),
                // The one difference, on purpose: a template keeps a metric with a broken
                // condition (that metric measures as Error, the others run, as in Argo); a call
                // carrying the one metric is refused naming the condition.
                (Err(p), Ok(t)) if t.broken_condition.is_some() => {
                    let p = p.to_string();
                    assert!(
                        p.starts_with("successCondition: expected an expression"),
                        "{p}"
                    );
                }
                (p, t) => {
                    panic!("the surfaces disagree on {interval:?}: plugin {p:?}, template {t:?}")
                }
            }
        }
        let bad = metric_from_argo(&ArgoMetric {
            interval: "soon".into(),
            ..with_count(None)
        })
        .unwrap_err()
        .to_string();
        assert!(bad.starts_with("interval: "), "{bad}");
    }

    /// A count past int32 is refused, as Argo's decoding refuses it, instead of
    /// being dropped (or wrapped to 1 as `int32(IntValue())` would).
    #[test]
    fn counts_outside_argos_int32_are_refused_naming_count() {
        for bad in [
            IntOrString::Int(4_294_967_297),
            IntOrString::Int(i64::from(i32::MAX) + 1),
            IntOrString::Int(-1),
            IntOrString::Str("4294967297".into()),
            IntOrString::Str("five".into()),
        ] {
            let e = metric_from_argo(&with_count(Some(bad.clone())))
                .expect_err(&format!("{bad:?} was accepted"))
                .to_string();
            assert!(
                e.starts_with("count: expected a whole number from 0 to 2147483647"),
                "{e}"
            );
        }
        for (good, n) in [
            (IntOrString::Int(5), 5),
            (IntOrString::Str(" 7 ".into()), 7),
            (IntOrString::Int(i64::from(i32::MAX)), 2_147_483_647),
        ] {
            let m = metric_from_argo(&with_count(Some(good))).unwrap();
            assert_eq!(m.count, Some(n));
        }
        assert_eq!(metric_from_argo(&with_count(None)).unwrap().count, None);
    }
}
