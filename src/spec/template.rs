//! Argo `AnalysisTemplate` / `ClusterAnalysisTemplate` documents and their metrics.

use std::time::Duration;

use serde_json::Value;

use super::args::{substitute, ArgValues};
use super::error::SpecError;
use super::metric::{check_address, MetricSpec};
use super::promql::check_promql;
use super::reader::{invalid, prefer_typo, ObjectReader};
use crate::condition::{self, evaluate_result, Condition, ConditionFailure, Which};
use crate::measurement::Phase;
use crate::prometheus::PrometheusConfig;

/// One metric of an analysis, ready for the engine: Argo's fields plus its provider.
#[derive(Debug, Clone)]
pub struct Metric {
    /// The metric's name.
    pub name: String,
    /// Argo's `interval`: time between checks.
    pub interval: Option<Duration>,
    /// Argo's `initialDelay` before the first check.
    pub initial_delay: Option<Duration>,
    /// Argo's `count`: how many checks a run makes.
    pub count: Option<u32>,
    /// `successCondition`, compiled.
    pub success_condition: Option<Condition>,
    /// `failureCondition`, compiled.
    pub failure_condition: Option<Condition>,
    /// A condition of a template metric that does not compile. As in Argo, only this metric
    /// fails: it measures as Error naming the condition, and the template's others still run.
    pub broken_condition: Option<ConditionFailure>,
    /// Argo's failure, inconclusive, error and success limits.
    pub limits: RunLimits,
    /// Where the measurement comes from.
    pub provider: Provider,
}

/// Argo's run limits for one metric (used by backtests; the controller enforces them itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunLimits {
    /// `failureLimit`.
    pub failure_limit: Option<i64>,
    /// `inconclusiveLimit`.
    pub inconclusive_limit: Option<i64>,
    /// `consecutiveErrorLimit`.
    pub consecutive_error_limit: Option<i64>,
    /// `consecutiveSuccessLimit`.
    pub consecutive_success_limit: Option<i64>,
}

/// Where a metric's measurement comes from.
// Built once per metric when a template is loaded and read in place after: the size of the
// larger variant costs nothing per check.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Provider {
    /// rollgate's own spec (`provider.plugin.<any>/...`).
    Rollgate(MetricSpec),
    /// Argo's built-in `prometheus` provider, judged exactly as Argo judges it.
    Prometheus {
        /// Address, timeout, headers, TLS.
        config: PrometheusConfig,
        /// The PromQL.
        query: String,
    },
    /// A provider rollgate cannot evaluate (web, job, datadog, ...): named, never guessed.
    Unsupported(String),
}

/// A parsed template: its name, declared arguments and raw metrics (placeholders unresolved).
#[derive(Debug, Clone)]
pub struct Template {
    /// `AnalysisTemplate` or `ClusterAnalysisTemplate`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Declared arguments with their default values (`None`: no value, or `valueFrom`).
    pub args: ArgValues,
    /// `spec.dryRun[].metricName` rules (regular expressions; `*` is every metric).
    pub dry_run: Vec<String>,
    raw_metrics: Vec<Value>,
}

pub(crate) const TEMPLATE_KINDS: [&str; 2] = ["AnalysisTemplate", "ClusterAnalysisTemplate"];

impl Template {
    /// Reads every AnalysisTemplate / ClusterAnalysisTemplate of a (multi-document) YAML text.
    /// Documents of other kinds are skipped; a file with no template at all is an error.
    pub fn parse_all(text: &str, source_name: &str) -> Result<Vec<Template>, SpecError> {
        let mut out = Vec::new();
        let mut others = Vec::new();
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let value =
                serde_json::Value::deserialize_yaml(doc).map_err(|message| SpecError::Syntax {
                    source_name: format!("{source_name} (document {})", i + 1),
                    message,
                })?;
            if value.is_null() {
                continue;
            }
            let kind = value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if TEMPLATE_KINDS.contains(&kind) {
                out.push(Template::from_value(&value)?);
            } else {
                others.push(value);
            }
        }
        if out.is_empty() {
            return Err(SpecError::Syntax {
                source_name: source_name.to_string(),
                message: super::lint::nothing_to_lint(&others),
            });
        }
        Ok(out)
    }

    /// Reads one template document's own keys (kind, metadata, args, dryRun, metrics).
    pub(crate) fn from_value_checked(value: &Value) -> Result<Template, SpecError> {
        Template::from_value(value)
    }

    fn from_value(value: &Value) -> Result<Template, SpecError> {
        let mut doc = ObjectReader::new("", value)?;
        let kind = doc.required_string("kind", "AnalysisTemplate or ClusterAnalysisTemplate")?;
        if let Some(api) = doc.string("apiVersion")? {
            if api != "argoproj.io/v1alpha1" {
                return Err(invalid(
                    "apiVersion",
                    "argoproj.io/v1alpha1",
                    &Value::String(api),
                ));
            }
        }
        let name = match doc.object("metadata")? {
            Some(mut m) => m.string("name")?.unwrap_or_default(),
            None => String::new(),
        };
        let mut spec = doc.object("spec")?.ok_or_else(|| SpecError::Missing {
            path: "spec".into(),
            hint: "a template needs spec.metrics".into(),
        })?;
        let mut args = ArgValues::new();
        if let Some(list) = spec.get("args") {
            let Value::Array(items) = list else {
                return Err(invalid("spec.args", "a list of {name, value}", list));
            };
            for (i, item) in items.iter().enumerate() {
                let mut a = ObjectReader::new(&format!("spec.args[{i}]"), item)?;
                let arg_name = a.required_string("name", "the argument's name")?;
                let value = match a.get("value") {
                    None => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    Some(other) => return Err(invalid(&a.path_of("value"), "a string", other)),
                };
                a.get("valueFrom");
                a.finish()?;
                args.insert(arg_name, value);
            }
        }
        let mut dry_run = Vec::new();
        if let Some(list) = spec.get("dryRun") {
            let Value::Array(items) = list else {
                return Err(invalid("spec.dryRun", "a list of {metricName}", list));
            };
            for (i, item) in items.iter().enumerate() {
                let mut d = ObjectReader::new(&format!("spec.dryRun[{i}]"), item)?;
                dry_run.push(d.required_string("metricName", "a metric name or pattern")?);
                d.finish()?;
            }
        }
        let raw_metrics = match spec.get("metrics") {
            Some(Value::Array(items)) if !items.is_empty() => items.clone(),
            Some(other) => {
                return Err(invalid(
                    "spec.metrics",
                    "a non-empty list of metrics",
                    other,
                ))
            }
            None => {
                return Err(SpecError::Missing {
                    path: "spec.metrics".into(),
                    hint: "a template needs at least one metric".into(),
                })
            }
        };
        Ok(Template {
            kind,
            name,
            args,
            dry_run,
            raw_metrics,
        })
    }

    /// A copy with `value` (a YAML scalar) set at the dotted `path` of metric `metric`, for
    /// backtest alternatives: Argo's metric keys (`failureLimit`, `successCondition`, ...) on the
    /// metric, any other key in its provider's spec (`compare.maxIncrease`, `query`).
    pub fn with_setting(
        &self,
        metric: &str,
        path: &str,
        value: &str,
    ) -> Result<Template, SpecError> {
        const METRIC_KEYS: [&str; 9] = [
            "interval",
            "initialDelay",
            "count",
            "successCondition",
            "failureCondition",
            "failureLimit",
            "inconclusiveLimit",
            "consecutiveErrorLimit",
            "consecutiveSuccessLimit",
        ];
        let setting = format!("--set {metric}.{path}");
        let parsed: Value =
            serde_yaml_ng::from_str(value).unwrap_or(Value::String(value.to_string()));
        let mut out = self.clone();
        let raw = out
            .raw_metrics
            .iter_mut()
            .find(|m| m.get("name").and_then(Value::as_str) == Some(metric))
            .ok_or_else(|| SpecError::Missing {
                path: setting.clone(),
                hint: format!("the template has no metric named {metric:?}"),
            })?;
        let keys: Vec<&str> = path.split('.').collect();
        let mut target = if METRIC_KEYS.contains(&keys[0]) {
            raw
        } else {
            let provider = raw.get_mut("provider").ok_or_else(|| SpecError::Missing {
                path: setting.clone(),
                hint: "the metric has no provider".into(),
            })?;
            match provider {
                Value::Object(p) if p.contains_key("plugin") => match p.get_mut("plugin") {
                    Some(Value::Object(plugin)) if plugin.len() == 1 => plugin
                        .values_mut()
                        .next()
                        .ok_or_else(|| invalid(&setting, "a plugin spec", &Value::Null))?,
                    other => {
                        return Err(invalid(
                            &setting,
                            "one plugin spec",
                            &other.cloned().unwrap_or_default(),
                        ))
                    }
                },
                Value::Object(p) => p
                    .values_mut()
                    .next()
                    .ok_or_else(|| invalid(&setting, "a provider", &Value::Null))?,
                other => return Err(invalid(&setting, "a provider object", other)),
            }
        };
        for (i, key) in keys.iter().enumerate() {
            let Value::Object(map) = target else {
                return Err(invalid(&setting, "an object on the way to the key", target));
            };
            if i + 1 == keys.len() {
                map.insert((*key).to_string(), parsed);
                return Ok(out);
            }
            target = map
                .entry((*key).to_string())
                .or_insert_with(|| Value::Object(Default::default()));
        }
        Err(invalid(
            &setting,
            "METRIC.KEY[.KEY...]=VALUE",
            &Value::String(path.to_string()),
        ))
    }

    /// The metrics as written, placeholders unresolved (for checks of the template itself).
    pub(crate) fn raw_metrics(&self) -> &[Value] {
        &self.raw_metrics
    }

    /// The metrics with `{{args.*}}` resolved from the defaults and `overrides`, validated.
    pub fn metrics(&self, overrides: &[(String, String)]) -> Result<Vec<Metric>, SpecError> {
        let mut args = self.args.clone();
        for (k, v) in overrides {
            args.insert(k.clone(), Some(v.clone()));
        }
        self.raw_metrics
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                let path = format!("spec.metrics[{i}]");
                let resolved = substitute(raw, &args, &path)?;
                Metric::from_value(&resolved, &path)
            })
            .collect()
    }
}

/// Converts one YAML document to JSON, reporting YAML errors as text.
trait DeserializeYaml: Sized {
    fn deserialize_yaml(doc: serde_yaml_ng::Deserializer<'_>) -> Result<Self, String>;
}

impl DeserializeYaml for Value {
    fn deserialize_yaml(doc: serde_yaml_ng::Deserializer<'_>) -> Result<Self, String> {
        use serde::Deserialize;
        Value::deserialize(doc).map_err(|e| e.to_string())
    }
}

/// Argo's fields of a metric that say when and how it is judged — everything but its name and
/// provider — read by one rule for every surface (templates, the net/rpc plugin, gRPC).
struct ArgoFields {
    interval: Option<Duration>,
    initial_delay: Option<Duration>,
    count: Option<u32>,
    success_condition: Option<Condition>,
    failure_condition: Option<Condition>,
    broken_condition: Option<ConditionFailure>,
    limits: RunLimits,
}

/// What a condition that does not compile does to the metric that holds it.
#[derive(Clone, Copy)]
enum BrokenCondition {
    /// Errors the metric's measurements, naming the condition; the template's other metrics
    /// still run, as in Argo (its providers evaluate conditions per measurement).
    ErrorsTheMetric,
    /// Refuses the metric naming the key: a call that carries one metric (net/rpc plugin,
    /// gRPC, an inline spec in serve) is itself the bad input.
    RefusesTheCall,
}

impl ArgoFields {
    /// Reads the fields from `m`, leaving the name, the provider and unknown keys to the caller.
    fn read(m: &mut ObjectReader<'_>, broken: BrokenCondition) -> Result<ArgoFields, SpecError> {
        let interval = m.duration("interval")?;
        let initial_delay = m.duration("initialDelay")?;
        let count_path = m.path_of("count");
        let count = match m.get("count") {
            Some(v) => argo_count(&count_path, v)?,
            None => None,
        };
        // Only the empty string is "no condition": Argo v1.9.1 compiles a whitespace-only
        // condition, and expr rejects it.
        let mut broken_condition = None;
        let mut condition = |m: &mut ObjectReader<'_>, which: Which| -> Result<_, SpecError> {
            let key = which.field_name();
            Ok(match m.string(key)? {
                Some(src) if !src.is_empty() => match (Condition::compile(&src), broken) {
                    (Ok(c), _) => Some(c),
                    (Err(e), BrokenCondition::ErrorsTheMetric) => {
                        broken_condition.get_or_insert(ConditionFailure::compile(which, &src, e));
                        None
                    }
                    (Err(e), BrokenCondition::RefusesTheCall) => {
                        return Err(SpecError::Invalid {
                            path: m.path_of(key),
                            expected: "an expression in Argo's condition language".into(),
                            got: format!("{:?} ({e})", super::error::shorten(&src)),
                        })
                    }
                },
                _ => None,
            })
        };
        let success_condition = condition(m, Which::Success)?;
        let failure_condition = condition(m, Which::Failure)?;
        let limits = RunLimits {
            failure_limit: int_or_string(m, "failureLimit")?,
            inconclusive_limit: int_or_string(m, "inconclusiveLimit")?,
            consecutive_error_limit: int_or_string(m, "consecutiveErrorLimit")?,
            consecutive_success_limit: int_or_string(m, "consecutiveSuccessLimit")?,
        };
        Ok(ArgoFields {
            interval,
            initial_delay,
            count,
            success_condition,
            failure_condition,
            broken_condition,
            limits,
        })
    }

    fn into_metric(self, name: String, provider: Provider) -> Metric {
        Metric {
            name,
            interval: self.interval,
            initial_delay: self.initial_delay,
            count: self.count,
            success_condition: self.success_condition,
            failure_condition: self.failure_condition,
            broken_condition: self.broken_condition,
            limits: self.limits,
            provider,
        }
    }
}

impl Metric {
    /// A metric from its Argo JSON form (`{name, interval, successCondition, provider, ...}`).
    pub fn from_value(value: &Value, path: &str) -> Result<Metric, SpecError> {
        Metric::read(value, path).map_err(|e| prefer_typo(e, value, path))
    }

    fn read(value: &Value, path: &str) -> Result<Metric, SpecError> {
        let mut m = ObjectReader::new(path, value)?;
        let name = m.required_string("name", "the metric's name")?;
        let fields = ArgoFields::read(&mut m, BrokenCondition::ErrorsTheMetric)?;
        let provider_path = m.path_of("provider");
        let provider_value = m.get("provider").ok_or_else(|| SpecError::Missing {
            path: provider_path.clone(),
            hint: "a metric needs a provider".into(),
        })?;
        let provider = read_provider(provider_value, &provider_path)?;
        // Argo fields rollgate does not use are accepted as they are.
        for key in ["dryRun", "measurementRetention"] {
            m.get(key);
        }
        m.finish()?;
        let metric = fields.into_metric(name, provider);
        open_ended_problem(&metric, path)?;
        Ok(metric)
    }

    /// A metric as the plugin surfaces receive it: Argo's fields in their JSON form (`{interval,
    /// count, successCondition, ...}`, no name or provider) read by the same rule as a template's,
    /// and the rollgate spec of its `provider.plugin` entry. The call carries this one metric,
    /// so a condition that does not compile refuses it (naming the key).
    pub(crate) fn from_plugin(
        name: &str,
        argo_fields: &Value,
        spec: MetricSpec,
    ) -> Result<Metric, SpecError> {
        let mut m = ObjectReader::new("", argo_fields)?;
        let fields = ArgoFields::read(&mut m, BrokenCondition::RefusesTheCall)?;
        m.finish()?;
        let metric = fields.into_metric(name.to_string(), Provider::Rollgate(spec));
        open_ended_problem(&metric, "")?;
        Ok(metric)
    }

    /// Argo's phase for `result` under this metric's conditions (both absent: Successful).
    pub fn judge(&self, result: &condition::Value) -> Result<Phase, ConditionFailure> {
        evaluate_result(
            result,
            self.success_condition.as_ref(),
            self.failure_condition.as_ref(),
        )
    }

    /// Every file on this machine the spec would have read, with its key.
    pub fn server_files(&self) -> Vec<(&'static str, &std::path::Path)> {
        let p = match &self.provider {
            Provider::Rollgate(spec) => match &spec.backend {
                Some(backend) => return backend.files(),
                None => &spec.prometheus,
            },
            _ => return Vec::new(),
        };
        let mut files = Vec::new();
        if let Some(f) = &p.bearer_token_file {
            files.push(("bearerTokenFile", f.as_path()));
        }
        if let Some(b) = &p.basic_auth {
            files.push(("basicAuth.passwordFile", b.password_file.as_path()));
        }
        if let Some(o) = &p.oauth2 {
            if let Some(f) = &o.client_secret_file {
                files.push(("oauth2.clientSecretFile", f.as_path()));
            }
            if let Some(f) = &o.client_assertion_file {
                files.push(("oauth2.clientAssertionFile", f.as_path()));
            }
        }
        if let Some(f) = p.google.as_ref().and_then(|g| g.credentials_file.as_ref()) {
            files.push(("google.credentialsFile", f.as_path()));
        }
        if let Some(f) = &p.ca_file {
            files.push(("caFile", f.as_path()));
        }
        files
    }

    /// The key that makes this metric sign with the AWS credentials of the machine that
    /// measures it (`sigv4`), and the profile it names, if any.
    pub fn aws_credentials(&self) -> Option<(&'static str, Option<&str>)> {
        let config = match &self.provider {
            Provider::Rollgate(spec) => match &spec.backend {
                Some(backend) => return backend.aws_credentials().map(|p| (backend.key(), p)),
                None => &spec.prometheus,
            },
            Provider::Prometheus { config, .. } => config,
            _ => return None,
        };
        let sigv4 = config.sigv4.as_ref()?;
        Some(("sigv4", sigv4.profile.as_deref()))
    }

    /// The first key that makes this metric read a file on the machine that measures it
    /// (credentials, CA), if any: specs that arrive over the network may not.
    pub fn server_file_key(&self) -> Option<&'static str> {
        let Provider::Rollgate(spec) = &self.provider else {
            return None;
        };
        if let Some(backend) = &spec.backend {
            return backend.files().first().map(|(key, _)| *key);
        }
        let p = &spec.prometheus;
        if p.bearer_token_file.is_some() {
            Some("bearerTokenFile")
        } else if p.basic_auth.is_some() {
            Some("basicAuth")
        } else if let Some(o) = &p.oauth2 {
            Some(if o.client_assertion_file.is_some() {
                "oauth2.clientAssertionFile"
            } else {
                "oauth2.clientSecretFile"
            })
        } else if let Some(g) = &p.google {
            // The metadata server's token is this machine's own identity: a credential of the
            // operator's as much as a file is.
            Some(if g.credentials_file.is_some() {
                "google.credentialsFile"
            } else {
                "google (the metadata server's token)"
            })
        } else if p.ca_file.is_some() {
            Some("caFile")
        } else {
            None
        }
    }
}

/// A `compare` metric that repeats at an `interval` without a `count` runs until the rollout
/// ends, possibly for days. Its test must stay valid and keep its power over an unlimited run;
/// the forms that cannot have one are refused here rather than measured by a gate that would
/// quietly stop being able to fail.
fn open_ended_problem(metric: &Metric, path: &str) -> Result<(), SpecError> {
    let open =
        metric.interval.is_some_and(|i| !i.is_zero()) && matches!(metric.count, None | Some(0));
    let Provider::Rollgate(spec) = &metric.provider else {
        return Ok(());
    };
    let (true, super::MetricKind::Compare(compare)) = (open, &spec.kind) else {
        return Ok(());
    };
    let count_path = if path.is_empty() {
        "count".to_string()
    } else {
        format!("{path}.count")
    };
    let got = format!(
        "no count with interval {} (a run until the rollout ends)",
        super::duration::format_duration(metric.interval.unwrap_or_default())
    );
    if let Some(backend) = &spec.backend {
        // The open-ended test reads each interval's counts by setting the query's window,
        // which rollgate can do in PromQL only.
        return Err(SpecError::Invalid {
            path: count_path,
            expected: format!(
                "a count: an open-ended compare (no count) sets each interval's window in the \
                 query, which rollgate does in PromQL only; with {} give the run a count",
                backend.name()
            ),
            got,
        });
    }
    match &compare.form {
        super::CompareForm::Distribution { .. } => Err(SpecError::Invalid {
            path: count_path,
            expected: "a count: the compare distribution form needs `count` or the histogram form \
                (its samples are a correlated series, which no test can judge over an unlimited \
                run without a model of that correlation; the histogram form judges requests and \
                needs no count)"
                .into(),
            got,
        }),
        super::CompareForm::Histogram { canary, stable, .. }
            if [canary, stable]
                .iter()
                .any(|q| super::run_clock::cell_query(q, 60).is_none()) =>
        {
            Err(SpecError::Invalid {
                path: count_path,
                expected: "a count, or histogram queries with one range window each (e.g. \
                    `increase(x_bucket[[[run.elapsed]]])` or `[5m]`): an open-ended histogram \
                    metric reads each interval's buckets, with the window set to the interval"
                    .into(),
                got,
            })
        }
        // Without a window per interval the counts could only be judged by spending one budget
        // over an unknown number of checks, which stops being able to fail after a few days.
        super::CompareForm::Ratio { canary, stable, .. }
            if [canary, stable]
                .iter()
                .flat_map(|side| [&side.bad, &side.total])
                .any(|q| super::run_clock::cell_query(q, 60).is_none()) =>
        {
            Err(SpecError::Invalid {
                path: count_path,
                expected: "a count, or count queries with one range window each (e.g. \
                    `increase(x_total[[[run.elapsed]]])` or `[5m]`): an open-ended ratio metric \
                    reads each interval's counts, with the window set to the interval"
                    .into(),
                got,
            })
        }
        _ => Ok(()),
    }
}

/// The largest `count` Argo can hold: `Metric.Count` is a `*intstr.IntOrString`, whose number
/// is an int32 (argo-rollouts v1.9.1, pkg/apis/rollouts/v1alpha1/analysis_types.go; k8s
/// apimachinery util/intstr). A larger JSON number fails the controller's decoding, and a larger
/// string is truncated by `int32(Count.IntValue())` in analysis/analysis.go.
pub(crate) const MAX_ARGO_COUNT: i64 = i32::MAX as i64;

/// Argo's `count` as every surface reads it (templates, the net/rpc plugin, gRPC): a whole
/// number, or a string holding one (what `{{args.count}}` leaves), from 0 to 2147483647.
/// Anything else is refused naming `path`, never wrapped or clamped: Argo would decode a larger
/// number as an error or truncate it (4294967297 runs once), and a negative count is no count.
fn argo_count(path: &str, value: &Value) -> Result<Option<u32>, SpecError> {
    const EXPECTED: &str = "a whole number from 0 to 2147483647 (Argo's int32 count)";
    let n = match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    n.filter(|n| (0..=MAX_ARGO_COUNT).contains(n))
        .and_then(|n| u32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| invalid(path, EXPECTED, value))
}

fn int_or_string(m: &mut ObjectReader<'_>, key: &'static str) -> Result<Option<i64>, SpecError> {
    let path = m.path_of(key);
    match m.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid(&path, "a whole number", &Value::Number(n.clone()))),
        Some(Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(&path, "a whole number", &Value::String(s.clone()))),
        Some(other) => Err(invalid(&path, "a whole number", other)),
    }
}

fn read_provider(value: &Value, path: &str) -> Result<Provider, SpecError> {
    let Value::Object(map) = value else {
        return Err(invalid(path, "an object with one provider", value));
    };
    let mut names = map.keys();
    let (Some(name), None) = (names.next(), names.next()) else {
        return Err(SpecError::Conflict {
            path: path.to_string(),
            message: format!("expected exactly one provider, found {}", map.len()),
        });
    };
    let inner = &map[name];
    let inner_path = format!("{path}.{name}");
    match name.as_str() {
        "plugin" => read_plugin(inner, &inner_path),
        "prometheus" => read_argo_prometheus(inner, &inner_path),
        other => Ok(Provider::Unsupported(other.to_string())),
    }
}

/// The plugin map holds one entry; rollgate takes it whatever its key, as the controller does.
fn read_plugin(value: &Value, path: &str) -> Result<Provider, SpecError> {
    let Value::Object(map) = value else {
        return Err(invalid(path, "an object with one plugin entry", value));
    };
    let mut entries = map.iter();
    match (entries.next(), entries.next()) {
        (Some((key, spec)), None) => {
            let spec_path = format!("{path}.{key}");
            if !key.contains("rollgate") && spec.get("noData").is_none() {
                return Ok(Provider::Unsupported(format!("plugin {key}")));
            }
            MetricSpec::from_value(spec, &spec_path).map(Provider::Rollgate)
        }
        _ => Err(SpecError::Conflict {
            path: path.to_string(),
            message: format!("expected exactly one plugin entry, found {}", map.len()),
        }),
    }
}

/// Argo's built-in provider: `{address, query, timeout (seconds), headers: [{key, value}], insecure}`.
fn read_argo_prometheus(value: &Value, path: &str) -> Result<Provider, SpecError> {
    let mut p = ObjectReader::new(path, value)?;
    let mut config = PrometheusConfig::default();
    if let Some(address) = p.string("address")? {
        config.address = check_address(&p.path_of("address"), &address)?;
    }
    let query = p.required_string("query", "a PromQL query")?;
    check_promql(&p.path_of("query"), &query)?;
    if let Some(secs) = p.integer("timeout", 1, 3600)? {
        config.timeout = Duration::from_secs(secs);
    }
    config.insecure_skip_verify = p.bool("insecure")?.unwrap_or(false);
    if let Some(list) = p.get("headers") {
        let Value::Array(items) = list else {
            return Err(invalid(
                &p.path_of("headers"),
                "a list of {key, value}",
                list,
            ));
        };
        for (i, item) in items.iter().enumerate() {
            let mut h = ObjectReader::new(&format!("{}[{i}]", p.path_of("headers")), item)?;
            let key = h.required_string("key", "the header name")?;
            let val = h.string("value")?.unwrap_or_default();
            h.finish()?;
            config.headers.push((key, val));
        }
    }
    if let Some(mut auth) = p.object("authentication")? {
        // Argo v1.7's `authentication.sigv4: {region, profile, roleArn}` (metricproviders/
        // prometheus): the same signing as a rollgate spec's `sigv4`, service `aps`.
        if let Some(mut v) = auth.object("sigv4")? {
            let region = v.required_string("region", "the AWS region of the workspace")?;
            let profile = v.string("profile")?.filter(|s| !s.is_empty());
            if v.string("roleArn")?.is_some_and(|r| !r.is_empty()) {
                return Err(SpecError::Conflict {
                    path: v.path_of("roleArn"),
                    message: "assuming another role is not supported by rollgate: give the pod that role (IRSA or EKS Pod Identity) and leave roleArn out".into(),
                });
            }
            v.finish()?;
            config.sigv4 = Some(crate::prometheus::SigV4Config {
                region,
                service: crate::prometheus::DEFAULT_SIGV4_SERVICE.to_string(),
                profile,
            });
        }
        if auth.has("oauth2") {
            return Err(SpecError::Conflict {
                path: auth.path_of("oauth2"),
                message: "oauth2 authentication of Argo's prometheus provider is not supported by rollgate; use a rollgate plugin metric with bearerTokenFile or basicAuth".into(),
            });
        }
        auth.finish()?;
    }
    p.finish()?;
    Ok(Provider::Prometheus { config, query })
}
