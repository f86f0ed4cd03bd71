//! Argo Rollouts' `web` metric provider: `POST /argo/v1/measure`, for stock Argo Rollouts
//! without installing the plugin.
//!
//! Request (JSON object):
//! - `spec`: a rollgate metric spec object, with optional `successCondition` /
//!   `failureCondition` next to its keys; or an Argo metric object (with `provider`);
//! - or `template` (a template loaded with `--templates`) and optional `metric`;
//! - `args`: optional object of argument values (strings, numbers or booleans);
//! - `name`: optional name of an inline metric.
//!
//! Answer: a measurement as JSON (`phase`, `message`, `value`, `metadata`, `startedAt`,
//! `finishedAt`, `resumeAt`, plus `metric`/`kind`, and `measurements` when a template's
//! metrics were combined). 200 for Successful, Failed, Inconclusive and Running; 503 for Error
//! and 4xx for a request that cannot be judged, because Argo's web provider makes any non-2xx
//! answer an Error measurement, the phase rollgate means, counted by `consecutiveErrorLimit`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{json, Value};

use super::analysis::{self, Audience, Selection, INLINE_METRIC_NAME};
use super::http::{self, AccessNote, Rejection};
use super::AppState;
use crate::engine::combine::Combined;
use crate::measurement::JsonKeys;

/// The keys a request may carry.
const KEYS: [&str; 5] = ["spec", "template", "metric", "args", "name"];

/// Reads a request into the selection it makes and its arguments.
pub fn parse_request(bytes: &[u8]) -> Result<(Selection, Vec<(String, String)>), Rejection> {
    let map = http::parse_object(bytes)?;
    if let Some(unknown) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(Rejection::bad_request(format!(
            "{unknown}: unknown key; a request has {}",
            KEYS.join(", ")
        )));
    }
    let string = |key: &str| -> Result<Option<String>, Rejection> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(other) => Err(Rejection::bad_request(format!(
                "{key}: expected a string, got {}",
                http::describe(other)
            ))),
        }
    };
    let template = string("template")?;
    let metric = string("metric")?;
    let name = string("name")?;
    let mut args = Vec::new();
    match map.get("args") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (k, v) in entries {
                let value = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(Rejection::bad_request(format!(
                            "args.{k}: expected a string, number or boolean, got {}",
                            http::describe(other)
                        )))
                    }
                };
                args.push((k.clone(), value));
            }
        }
        Some(other) => {
            return Err(Rejection::bad_request(format!(
                "args: expected an object of argument values, got {}",
                http::describe(other)
            )))
        }
    }
    let spec = match map.get("spec") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(other) => {
            return Err(Rejection::bad_request(format!(
                "spec: expected a metric spec object, got {}",
                http::describe(other)
            )))
        }
    };
    let selection = match (template, spec) {
        (Some(_), Some(_)) => {
            return Err(Rejection::unprocessable(
                "give either template or spec, not both",
            ))
        }
        (None, None) => {
            return Err(Rejection::unprocessable(
                "name a loaded template (\"template\") or send a spec (\"spec\")",
            ))
        }
        (Some(name), None) => Selection::Template { name, metric },
        (None, Some(spec)) => {
            if metric.is_some() {
                return Err(Rejection::unprocessable(
                    "metric: only with a template; name an inline metric with \"name\"",
                ));
            }
            Selection::Inline {
                spec,
                name: name.unwrap_or_else(|| INLINE_METRIC_NAME.to_string()),
            }
        }
    };
    Ok((selection, args))
}

/// The answer's JSON: the single measurement, or the combination of a template's metrics
/// with each one under `measurements`.
pub(crate) fn answer_json(outcome: &Combined) -> Value {
    match (outcome.results.as_slice(), outcome.summary()) {
        ([only], _) => only.to_json(JsonKeys::Serve, ""),
        (_, Some(summary)) => {
            let mut value = summary.to_json(JsonKeys::Serve, None);
            value["measurements"] = analysis::measurements_json(outcome);
            value
        }
        // No metric at all (a plan never has none): the combined phase and reason alone.
        (_, None) => json!({"phase": outcome.phase, "message": outcome.reason()}),
    }
}

/// Which run of repeated calls a request belongs to. Argo's web provider sends no run id
/// (v1.9.1 `metricproviders/webmetric/webmetric.go`: a URL, method, headers and body with the
/// template's arguments already substituted), so a run is every call with the same selection
/// and arguments; the engine's tracker ends it after a few idle intervals (docs/serve.md, "Runs
/// of repeated calls").
pub(crate) fn run_of(selection: &Selection, args: &[(String, String)]) -> String {
    format!("web {selection:?} {args:?}")
}

/// `POST /argo/v1/measure`.
pub(crate) async fn measure(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Argo reads JSON whatever it asks for; plain text only when a person asks for it.
    let json = !headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/plain"));
    let bytes = match http::read_body(
        &headers,
        body,
        state.settings.max_body_bytes,
        state.settings.request_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(r) => return http::refuse_with(json, r),
    };
    let planned = match parse_request(&bytes) {
        Ok((selection, args)) => {
            let run = run_of(&selection, &args);
            state.plan(selection, args).await.map(|plan| (plan, run))
        }
        Err(r) => Err(r),
    };
    let (plan, run) = match planned {
        Ok(p) => p,
        Err(r) => return http::refuse_with(json, r),
    };
    let outcome = analysis::measure(&state, &plan, Some(&run)).await;
    state.metrics.observe_verdict("argo_web", outcome.phase);
    let status = Audience::ArgoWeb.status(outcome.phase);
    let mut response = if json {
        http::reply_json(status, &answer_json(&outcome))
    } else {
        http::reply_text(status, &outcome.reason())
    };
    response.extensions_mut().insert(AccessNote {
        template: plan.template,
        verdict: Some(outcome.phase),
        ..AccessNote::default()
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inline_and_template_requests() {
        let (sel, args) = parse_request(
            br#"{"spec": {"query": "up", "noData": "fail"}, "args": {"a": "x", "n": 3, "b": true}, "name": "up"}"#,
        )
        .unwrap();
        assert!(matches!(sel, Selection::Inline { ref name, .. } if name == "up"));
        assert_eq!(
            args,
            vec![
                ("a".to_string(), "x".to_string()),
                ("b".to_string(), "true".to_string()),
                ("n".to_string(), "3".to_string())
            ]
        );
        let (sel, _) = parse_request(br#"{"template": "t", "metric": "m"}"#).unwrap();
        assert!(
            matches!(sel, Selection::Template { ref name, ref metric } if name == "t" && metric.as_deref() == Some("m"))
        );
    }

    #[test]
    fn bad_requests_are_named() {
        for (body, status, needle) in [
            (
                &br#"{"spec": "query: up"}"#[..],
                400,
                "spec: expected a metric spec object",
            ),
            (br#"{"spec": {}, "args": {"a": [1]}}"#, 400, "args.a"),
            (br#"{"spec": {}, "extra": 1}"#, 400, "extra: unknown key"),
            (br#"{"template": 3}"#, 400, "template: expected a string"),
            (br#"{}"#, 422, "name a loaded template"),
            (br#"{"spec": {}, "template": "t"}"#, 422, "not both"),
            (
                br#"{"spec": {}, "metric": "m"}"#,
                422,
                "only with a template",
            ),
        ] {
            let e = parse_request(body).unwrap_err();
            assert_eq!(e.status.as_u16(), status, "{}", e.message);
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }
}
