//! The one parser from Argo's metric (as the controller or a gRPC caller sends it) to the
//! engine's [`Metric`], with the cache that keeps repeated metrics from being parsed again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use super::{ArgoMetric, IntOrString};
use crate::spec::duration::parse_duration;
use crate::spec::{argo_count, Metric, MetricSpec, SpecError};

/// How many parsed metrics [`metric_from_argo`] keeps; past it the cache starts over.
const METRIC_CACHE_SIZE: usize = 4096;

/// Builds the engine's metric from the controller's: the single `provider.plugin` entry, whatever
/// its key, plus Argo's conditions, interval and count. The controller sends the same metric at
/// every interval, and parsing it (PromQL, regexes, conditions) costs more than the whole
/// protocol, so results are kept by the metric's wire form less its name (metrics of many runs
/// share a spec).
pub(crate) fn metric_from_argo(metric: &ArgoMetric) -> Result<Arc<Metric>, SpecError> {
    type Cache = Mutex<HashMap<ArgoMetric, Result<Arc<Metric>, SpecError>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = ArgoMetric {
        name: String::new(),
        ..metric.clone()
    };
    let cached = cache.lock().ok().and_then(|c| c.get(&key).cloned());
    let parsed = match cached {
        Some(hit) => hit,
        None => {
            let parsed = parse_argo_metric(&key).map(Arc::new);
            if let Ok(mut c) = cache.lock() {
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

fn parse_argo_metric(metric: &ArgoMetric) -> Result<Metric, SpecError> {
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
    let duration = |key: &str, text: &str| match text.trim() {
        "" => Ok(None),
        text => parse_duration(text)
            .map(Some)
            .map_err(|why| SpecError::Invalid {
                path: key.into(),
                expected: "a duration like 1m".into(),
                got: why,
            }),
    };
    let interval = duration("interval", &metric.interval)?;
    let mut m = Metric::with_spec(
        &metric.name,
        spec,
        &metric.success_condition,
        &metric.failure_condition,
        interval,
    )?;
    m.initial_delay = duration("initialDelay", &metric.initial_delay)?;
    // The template reader's rule, on the same JSON form the controller decoded it from.
    m.count = match &metric.count {
        Some(IntOrString::Int(n)) => argo_count("count", &Value::from(*n))?,
        Some(IntOrString::Str(s)) => argo_count("count", &Value::String(s.clone()))?,
        None => None,
    };
    Ok(m)
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

    /// Issue 14: a count past int32 is refused, as Argo's decoding refuses it, instead of
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
