//! What the HTTP surfaces share: turning a request's selection (a loaded template, or a spec
//! sent inline) into validated metrics, and measuring them with the engine within the
//! server's deadline. Verdicts are the engine's; this only gathers them.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use chrono::Utc;
use serde_json::{Map, Value};

use super::http::Rejection;
use super::templates::TemplateSet;
use super::AppState;
use crate::engine::combine::{Combined, Named};
use crate::engine::{Call, Deadline, Position, Trust};
use crate::measurement::{JsonKeys, Measurement, Phase};
use crate::spec::{
    check_declared, placeholder_names, substitute, ArgValues, Metric, MetricSpec, Provider,
    SpecError,
};

/// What a status code means to the caller, and so how each verdict must be answered. This is
/// the one place where verdicts become status codes; the surfaces only say who is asking.
///
/// Flagger (v1.44 `pkg/controller/webhook.go` `callWebhook`) passes a hook on 200-202 only;
/// what a failing hook does depends on its type (`scheduler.go`, `scheduler_hooks.go`).
/// Argo's web provider makes every non-2xx an Error measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Audience {
    /// `/flagger/v1/check` without a `hook` type, and `post-rollout` (whose failure is only an
    /// event): Successful 200, Failed 412, Inconclusive and Running 409, Error 503.
    FlaggerCheck,
    /// Flagger's `rollout` and `pre-rollout` hooks: every non-2xx adds a failed check, counted
    /// against `threshold`. So only Failed and Error (after Flagger's retries) fail the hook;
    /// Inconclusive and Running pass with 202 and leave the holding to a confirm gate.
    FlaggerCounted,
    /// Flagger's `confirm-*` hooks: a non-2xx pauses and is asked again at the next interval.
    /// Only Successful passes.
    FlaggerGate,
    /// Flagger's `rollback` hook: a 2xx rolls back at once. Only Failed does.
    FlaggerRollback,
    /// Argo's `web` provider: every verdict is a 200 measurement; Error is 503, which Argo
    /// records as an Error measurement.
    ArgoWeb,
}

impl Audience {
    /// The status code that tells this caller `phase`.
    pub(crate) fn status(self, phase: Phase) -> StatusCode {
        use Phase::*;
        match (self, phase) {
            (_, Error) => StatusCode::SERVICE_UNAVAILABLE,
            (Audience::ArgoWeb, _) => StatusCode::OK,
            (Audience::FlaggerRollback, Failed) => StatusCode::OK,
            (Audience::FlaggerRollback, _) => StatusCode::CONFLICT,
            (_, Successful) => StatusCode::OK,
            (_, Failed) => StatusCode::PRECONDITION_FAILED,
            (Audience::FlaggerCounted, Inconclusive | Running) => StatusCode::ACCEPTED,
            (Audience::FlaggerCheck | Audience::FlaggerGate, Inconclusive | Running) => {
                StatusCode::CONFLICT
            }
        }
    }
}

/// The name an inline metric gets when the request names none.
pub(crate) const INLINE_METRIC_NAME: &str = "inline";

/// Which analysis a request asks for.
#[derive(Debug, Clone)]
pub enum Selection {
    /// A template loaded from `--templates`, optionally one metric of it.
    Template {
        /// The template's name.
        name: String,
        /// One of its metrics; all without.
        metric: Option<String>,
    },
    /// A spec sent with the request: a rollgate metric spec (plus optional `successCondition` /
    /// `failureCondition`), or an Argo metric object (with `provider`).
    Inline {
        /// The spec as sent.
        spec: Value,
        /// The metric's name.
        name: String,
    },
}

/// The metrics to measure for one request.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The template they come from, if any.
    pub template: Option<String>,
    /// Validated metrics, placeholders resolved (shared with the template set's cache).
    pub metrics: Vec<Arc<Metric>>,
    /// How far their specs are trusted: a template is the operator's, an inline spec came
    /// over the network.
    pub trust: Trust,
}

/// Resolves a selection with the request's arguments (later pairs win over earlier ones).
/// Inline specs are judged by the server's `network` trust policy: refused under
/// `--no-inline-specs`, never naming files on this server (token, password or CA files: those
/// belong in templates an operator controls).
pub fn plan(
    templates: &TemplateSet,
    selection: &Selection,
    args: &[(String, String)],
    network: &Trust,
) -> Result<Plan, Rejection> {
    match selection {
        Selection::Template { name, metric } => plan_template(templates, name, metric, args),
        Selection::Inline { spec, name } => {
            network
                .admit_inline()
                .map_err(|e| Rejection::unprocessable(e.to_string()))?;
            let metric = inline_metric(spec, name, args)
                .map_err(|e| Rejection::unprocessable(format!("invalid spec: {e}")))?;
            // Refused before anything is measured; the rule is the engine's.
            network.admit(&metric).map_err(|e| {
                Rejection::unprocessable(format!(
                    "spec.{e}; put credentials in a template loaded with --templates"
                ))
            })?;
            let metrics = vec![Arc::new(metric)];
            refuse_unsupported(&metrics, None)?;
            Ok(Plan {
                template: None,
                metrics,
                trust: network.clone(),
            })
        }
    }
}

/// A missing argument as a request supplies it: the CLI's `--arg NAME=VALUE` means nothing to
/// a Flagger webhook or a web-provider call, which carry `args.NAME`.
fn for_a_request(e: SpecError) -> String {
    match &e {
        SpecError::Missing { path, .. } => match path.strip_prefix("args.") {
            Some(arg) => format!(
                "{path}: is required: the template gives it no value, and a Flagger webhook supplies it as the metadata key `args.{arg}`, a web-provider request as `args: {{{arg}: VALUE}}`"
            ),
            None => e.to_string(),
        },
        _ => e.to_string(),
    }
}

fn plan_template(
    templates: &TemplateSet,
    name: &str,
    metric: &Option<String>,
    args: &[(String, String)],
) -> Result<Plan, Rejection> {
    let Some(resolved) = templates.resolve(name, args) else {
        let known: Vec<&str> = templates.names().take(20).collect();
        return Err(Rejection::unprocessable(if known.is_empty() {
            format!("unknown template {name:?}: no templates are loaded (start rollgate serve with --templates DIR)")
        } else {
            format!(
                "unknown template {name:?}; loaded templates: {}",
                known.join(", ")
            )
        }));
    };
    let all = resolved.map_err(|e| {
        let file = templates
            .get(name)
            .map(|t| t.file.display().to_string())
            .unwrap_or_default();
        Rejection::unprocessable(format!("template {name:?} ({file}): {}", for_a_request(e)))
    })?;
    let metrics: Vec<Arc<Metric>> = match metric {
        None => all.iter().cloned().collect(),
        Some(wanted) => {
            let chosen: Vec<Arc<Metric>> =
                all.iter().filter(|m| &m.name == wanted).cloned().collect();
            if chosen.is_empty() {
                let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
                return Err(Rejection::unprocessable(format!(
                    "template {name:?} has no metric {wanted:?}; its metrics: {}",
                    names.join(", ")
                )));
            }
            chosen
        }
    };
    refuse_unsupported(&metrics, Some(name))?;
    Ok(Plan {
        template: Some(name.to_string()),
        metrics,
        trust: Trust::OPERATOR,
    })
}

/// Builds the metric of an inline spec, `{{args.*}}` resolved.
pub(crate) fn inline_metric(
    spec: &Value,
    name: &str,
    args: &[(String, String)],
) -> Result<Metric, SpecError> {
    let values: ArgValues = args
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    // An inline spec declares no arguments: its placeholders are what it accepts.
    let declared = placeholder_names(spec);
    check_declared(
        declared.iter().map(String::as_str),
        args.iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !super::templates::IMPLICIT_ARGS.contains(k)),
    )?;
    let resolved = substitute(spec, &values, "spec")?;
    let Value::Object(mut map) = resolved else {
        return Err(crate::spec::reader::invalid(
            "spec",
            "a metric spec object",
            &resolved,
        ));
    };
    if map.contains_key("provider") {
        // An Argo metric object: its own name wins, the request's name fills in.
        map.entry("name")
            .or_insert_with(|| Value::String(name.to_string()));
        return Metric::from_value(&Value::Object(map), "spec");
    }
    // A bare rollgate spec may carry Argo's conditions beside its own keys.
    let mut argo_fields = Map::new();
    for key in ["successCondition", "failureCondition"] {
        match map.remove(key) {
            None | Some(Value::Null) => {}
            Some(condition @ Value::String(_)) => {
                argo_fields.insert(key.to_string(), condition);
            }
            Some(other) => {
                return Err(crate::spec::reader::invalid(
                    &format!("spec.{key}"),
                    "a condition string such as \"result[0] < 0.01\"",
                    &other,
                ))
            }
        }
    }
    let spec = MetricSpec::from_value(&Value::Object(map), "spec")?;
    Metric::from_plugin(name, &Value::Object(argo_fields), spec)
}

fn refuse_unsupported<M: AsRef<Metric>>(
    metrics: &[M],
    template: Option<&str>,
) -> Result<(), Rejection> {
    let unsupported: Vec<String> = metrics
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|m: &Metric| match &m.provider {
            Provider::Unsupported(p) => Some(format!("{} ({p})", m.name)),
            _ => None,
        })
        .collect();
    if unsupported.is_empty() {
        return Ok(());
    }
    let hint = if template.is_some() {
        "; select the other metrics with `metric`"
    } else {
        ""
    };
    Err(Rejection::unprocessable(format!(
        "rollgate cannot evaluate metric {}{hint}",
        unsupported.join(", ")
    )))
}

/// A metric's kind, as labelled in `/metrics` and answers.
pub(crate) fn kind_of(metric: &Metric) -> &'static str {
    match &metric.provider {
        Provider::Rollgate(spec) => spec.kind.name(),
        Provider::Prometheus { .. } => "prometheus",
        Provider::Unsupported(_) => "unsupported",
    }
}

/// Measures every metric of the plan concurrently, each answered within the server's
/// deadline (an Error that says so past it). `run` identifies the run of repeated calls this
/// one belongs to (Flagger's canary revision, the web provider's request), so a metric with an
/// `interval` is placed in it by the engine's run tracker.
pub(crate) async fn measure(state: &AppState, plan: &Plan, run: Option<&str>) -> Combined {
    let deadline = state.settings.deadline;
    let work = plan.metrics.iter().map(|metric| async move {
        let started = Instant::now();
        let started_at = Utc::now();
        let kind = kind_of(metric);
        let position = match run {
            Some(run) => Position::Tracked {
                run: run.to_string(),
                metric: format!(
                    "{}/{}",
                    plan.template.as_deref().unwrap_or(INLINE_METRIC_NAME),
                    metric.name
                ),
            },
            None => Position::Single,
        };
        let call = Call {
            metric,
            at: None,
            deadline: Deadline::answer_within(deadline, "deadline (--deadline)"),
            trust: plan.trust.clone(),
            position,
            previous: None,
        };
        let measurement = state
            .engine
            .call(call)
            .await
            .unwrap_or_else(|e| Measurement::error(e.to_string(), started_at));
        state
            .metrics
            .observe_measurement(kind, measurement.phase, started.elapsed());
        Named {
            metric: metric.name.clone(),
            kind,
            measurement,
        }
    });
    Combined::new(futures::future::join_all(work).await)
}

/// Every measurement as JSON in the serve key set (Argo's fields plus `metric` and `kind`).
pub(crate) fn measurements_json(outcome: &Combined) -> Value {
    outcome.measurements_json(JsonKeys::Serve, "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> Value {
        json!({
            "query": "sum(rate(x{service=\"{{args.service}}\"}[5m]))",
            "noData": "inconclusive",
            "successCondition": "result[0] < 0.01"
        })
    }

    #[test]
    fn inline_specs_resolve_args_and_take_their_conditions() {
        let m = inline_metric(&spec(), "ratio", &[("service".into(), "pay".into())]).unwrap();
        assert_eq!(m.name, "ratio");
        assert!(m.success_condition.is_some() && m.failure_condition.is_none());
        let Provider::Rollgate(s) = &m.provider else {
            panic!("not a rollgate metric")
        };
        assert_eq!(kind_of(&m), "query");
        assert_eq!(s.no_data.as_str(), "inconclusive");
    }

    #[test]
    fn inline_spec_errors_name_their_key() {
        let e = inline_metric(&spec(), "r", &[]).unwrap_err().to_string();
        assert!(e.contains("args.service"), "{e}");
        let mut bad = spec();
        bad["noData"] = json!("maybe");
        let e = inline_metric(&bad, "r", &[("service".into(), "a".into())])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("spec.noData"), "{e}");
        let mut bad = spec();
        bad["successCondition"] = json!(3);
        let e = inline_metric(&bad, "r", &[("service".into(), "a".into())])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("spec.successCondition"), "{e}");
    }

    #[test]
    fn argo_metric_objects_are_accepted_inline() {
        let argo = json!({
            "successCondition": "result[0] < 1",
            "provider": {"prometheus": {"address": "http://p:9090", "query": "up"}}
        });
        let m = inline_metric(&argo, "builtin", &[]).unwrap();
        assert_eq!(m.name, "builtin");
        assert_eq!(kind_of(&m), "prometheus");
    }

    #[test]
    fn inline_specs_may_not_name_server_files() {
        let mut s = spec();
        s["prometheus"] = json!({"address": "http://evil:1", "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"});
        let set = TemplateSet::default();
        let sel = Selection::Inline {
            spec: s,
            name: "x".into(),
        };
        let e = plan(
            &set,
            &sel,
            &[("service".into(), "a".into())],
            &Trust::NETWORK,
        )
        .unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        assert!(e.message.contains("bearerTokenFile"), "{}", e.message);
        let e = plan(&set, &sel, &[], &Trust::network(false)).unwrap_err();
        assert!(e.message.contains("disabled"), "{}", e.message);
    }

    #[test]
    fn inline_specs_may_not_use_another_backends_keys_or_aws_identity() {
        let set = TemplateSet::default();
        let refused = |key: &str, block: Value, query: &str| {
            let mut spec = json!({"query": query, "noData": "fail"});
            spec[key] = block;
            let sel = Selection::Inline {
                spec,
                name: "x".into(),
            };
            plan(&set, &sel, &[], &Trust::NETWORK).unwrap_err()
        };
        let e = refused(
            "datadog",
            json!({"address": "http://evil:1", "apiKeyFile": "/etc/dd/api", "appKeyFile": "/etc/dd/app"}),
            "sum:errors{*}",
        );
        assert_eq!(e.status.as_u16(), 422);
        assert!(
            e.message
                .contains("datadog.apiKeyFile: specs sent over the network"),
            "{}",
            e.message
        );
        let e = refused(
            "cloudwatch",
            json!({"region": "us-east-1", "address": "http://evil:1"}),
            "SELECT SUM(Errors) FROM \"AWS/ApplicationELB\"",
        );
        assert!(
            e.message
                .contains("cloudwatch: specs sent over the network may not sign"),
            "{}",
            e.message
        );
    }

    #[test]
    fn unknown_templates_are_named() {
        let set = TemplateSet::default();
        let sel = Selection::Template {
            name: "nope".into(),
            metric: None,
        };
        let e = plan(&set, &sel, &[], &Trust::NETWORK).unwrap_err();
        assert!(e.message.contains("\"nope\""), "{}", e.message);
    }

    #[test]
    fn each_audience_reads_the_verdicts_as_documented() {
        use Phase::*;
        let row = |a: Audience| -> Vec<u16> {
            [Successful, Failed, Inconclusive, Running, Error]
                .map(|p| a.status(p).as_u16())
                .to_vec()
        };
        assert_eq!(row(Audience::FlaggerCheck), vec![200, 412, 409, 409, 503]);
        assert_eq!(row(Audience::FlaggerCounted), vec![200, 412, 202, 202, 503]);
        assert_eq!(row(Audience::FlaggerGate), vec![200, 412, 409, 409, 503]);
        assert_eq!(
            row(Audience::FlaggerRollback),
            vec![409, 200, 409, 409, 503]
        );
        assert_eq!(row(Audience::ArgoWeb), vec![200, 200, 200, 200, 503]);
    }
}

#[cfg(test)]
mod request_message_tests {
    use super::*;

    /// A Flagger caller cannot pass `--arg`: the message names the metadata key instead.
    #[test]
    fn a_missing_argument_names_the_request_key_not_the_cli_flag() {
        let args: ArgValues = [("service".to_string(), None)].into_iter().collect();
        let e = crate::spec::substitute_str("{{args.service}}", &args, "query").unwrap_err();
        assert!(e.to_string().contains("--arg"), "{e}");
        let shown = for_a_request(e);
        assert!(!shown.contains("--arg"), "{shown}");
        assert!(shown.contains("metadata key `args.service`"), "{shown}");
    }
}
