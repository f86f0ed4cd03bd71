//! Flagger's webhooks: `POST /flagger/v1/check` and `POST /flagger/v1/rollback`.
//!
//! Flagger posts `{name, namespace, phase, checksum, metadata}` (metadata values are strings)
//! and only looks at the status code: 200-202 pass, anything else fails the hook, and a 5xx
//! body is dropped when Flagger retries. The metadata selects the analysis:
//!
//! - `template: NAME` (a template loaded with `--templates`), optional `metric: NAME`;
//! - or `spec: <YAML>` (a rollgate metric spec), optional `successCondition` /
//!   `failureCondition`, optional `metric: NAME` naming it;
//! - `args.NAME: VALUE` for `{{args.NAME}}`; the canary's `name` and `namespace` are
//!   arguments too (an explicit `args.name` / `args.namespace` wins);
//! - `token: TOKEN` when the server requires a bearer token (`--auth-token-file`), since
//!   Flagger's webhooks cannot send an `Authorization` header.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::analysis::{self, Selection, INLINE_METRIC_NAME};
use super::http::{self, AccessNote, Rejection};
use super::AppState;
use crate::measurement::Phase;
use crate::spec::parse_request_yaml;

/// The metadata key that carries the bearer token when authentication is on (Flagger's
/// webhooks cannot send headers).
pub const TOKEN_KEY: &str = "token";

/// The metadata keys the webhook reads (besides `args.*` and `token`).
const KEYS: [&str; 5] = [
    "template",
    "metric",
    "spec",
    "successCondition",
    "failureCondition",
];

/// Flagger's webhook payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    /// The canary's name.
    pub name: String,
    /// The canary's namespace.
    pub namespace: String,
    /// The canary's phase (`Progressing`, `Waiting`, ...), informational.
    pub phase: String,
    /// Flagger's checksum of the canary's configuration, informational.
    pub checksum: String,
    /// The hook's metadata.
    pub metadata: BTreeMap<String, String>,
}

/// Which webhook was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `rollout`, `pre-rollout`, `confirm-*`: 200 lets the canary go on.
    Check,
    /// `rollback`: 200 makes Flagger roll back.
    Rollback,
}

impl Hook {
    fn surface(self) -> &'static str {
        match self {
            Hook::Check => "flagger_check",
            Hook::Rollback => "flagger_rollback",
        }
    }
}

/// The status of `/flagger/v1/check` for a verdict: Successful 200, Failed 412 (a 4xx keeps
/// the reason in Flagger's events), Inconclusive and Running 409 (on confirm hooks this only
/// pauses), Error 503 (Flagger retries it when the hook sets `retries`).
pub fn check_status(phase: Phase) -> StatusCode {
    match phase {
        Phase::Successful => StatusCode::OK,
        Phase::Failed => StatusCode::PRECONDITION_FAILED,
        Phase::Inconclusive | Phase::Running => StatusCode::CONFLICT,
        Phase::Error => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The status of `/flagger/v1/rollback`: 200 "roll back now" for Failed, 409 "do not roll
/// back" for Successful, Inconclusive and Running, 503 for Error. Flagger treats 503 as "do not
/// roll back" as well (retrying it first when `retries` is set): a failure to judge never
/// triggers a rollback on its own, and it stays distinct in logs and `/metrics`.
pub fn rollback_status(phase: Phase) -> StatusCode {
    match phase {
        Phase::Failed => StatusCode::OK,
        Phase::Successful | Phase::Inconclusive | Phase::Running => StatusCode::CONFLICT,
        Phase::Error => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Reads Flagger's payload: `name` and `namespace` required, `phase` and `checksum` optional
/// strings, `metadata` an optional object of strings. Other keys are ignored (Flagger may add
/// some).
pub fn parse_payload(bytes: &[u8]) -> Result<Payload, Rejection> {
    let map = http::parse_object(bytes)?;
    let string = |key: &str, required: bool| -> Result<String, Rejection> {
        match map.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) if !required => Ok(String::new()),
            None | Some(Value::Null) => Err(Rejection::bad_request(format!(
                "{key}: is required (Flagger sends the canary's {key})"
            ))),
            Some(other) => Err(Rejection::bad_request(format!(
                "{key}: expected a string, got {}",
                http::describe(other)
            ))),
        }
    };
    let name = string("name", true)?;
    let namespace = string("namespace", true)?;
    let phase = string("phase", false)?;
    let checksum = string("checksum", false)?;
    let mut metadata = BTreeMap::new();
    match map.get("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (k, v) in entries {
                match v {
                    Value::String(s) => {
                        metadata.insert(k.clone(), s.clone());
                    }
                    other => {
                        return Err(Rejection::bad_request(format!(
                            "metadata.{k}: expected a string (Flagger metadata values are strings; quote it in the Canary), got {}",
                            http::describe(other)
                        )))
                    }
                }
            }
        }
        Some(other) => {
            return Err(Rejection::bad_request(format!(
                "metadata: expected an object of strings, got {}",
                http::describe(other)
            )))
        }
    }
    Ok(Payload {
        name,
        namespace,
        phase,
        checksum,
        metadata,
    })
}

/// The analysis the metadata selects and the template arguments it supplies.
pub fn selection(payload: &Payload) -> Result<(Selection, Vec<(String, String)>), Rejection> {
    let md = &payload.metadata;
    let mut args = Vec::new();
    if !payload.name.is_empty() {
        args.push(("name".to_string(), payload.name.clone()));
    }
    if !payload.namespace.is_empty() {
        args.push(("namespace".to_string(), payload.namespace.clone()));
    }
    for (key, value) in md {
        if let Some(arg) = key.strip_prefix("args.") {
            if arg.is_empty() {
                return Err(Rejection::unprocessable(
                    "metadata key \"args.\" names no argument: use args.NAME",
                ));
            }
            args.push((arg.to_string(), value.clone()));
        } else if !KEYS.contains(&key.as_str()) {
            return Err(Rejection::unprocessable(format!(
                "metadata.{key}: unknown key; the webhook reads {} and args.NAME",
                KEYS.join(", ")
            )));
        }
    }
    let get = |k: &str| md.get(k).filter(|v| !v.trim().is_empty());
    let selection = match (get("template"), md.get("spec")) {
        (Some(_), Some(_)) => {
            return Err(Rejection::unprocessable(
                "metadata: give either template or spec, not both",
            ))
        }
        (None, None) => {
            return Err(Rejection::unprocessable(
                "metadata: name a loaded template (template: NAME) or carry a spec (spec: YAML)",
            ))
        }
        (Some(template), None) => {
            for key in ["successCondition", "failureCondition"] {
                if md.contains_key(key) {
                    return Err(Rejection::unprocessable(format!(
                        "metadata.{key}: only for an inline spec; a template's metrics carry their own conditions"
                    )));
                }
            }
            Selection::Template {
                name: template.trim().to_string(),
                metric: get("metric").map(|m| m.trim().to_string()),
            }
        }
        (None, Some(yaml)) => {
            let mut spec = parse_request_yaml(yaml)
                .map_err(|e| Rejection::unprocessable(format!("metadata.spec: {e}")))?;
            let Value::Object(map) = &mut spec else {
                return Err(Rejection::unprocessable(format!(
                    "metadata.spec: expected a YAML mapping (a rollgate metric spec), got {}",
                    http::describe(&spec)
                )));
            };
            add_condition(map, md, "successCondition")?;
            add_condition(map, md, "failureCondition")?;
            Selection::Inline {
                spec,
                name: get("metric")
                    .map(|m| m.trim().to_string())
                    .unwrap_or_else(|| INLINE_METRIC_NAME.to_string()),
            }
        }
    };
    Ok((selection, args))
}

fn add_condition(
    spec: &mut Map<String, Value>,
    md: &BTreeMap<String, String>,
    key: &str,
) -> Result<(), Rejection> {
    if let Some(condition) = md.get(key) {
        if spec.contains_key(key) {
            return Err(Rejection::unprocessable(format!(
                "{key} is given both in metadata and inside metadata.spec; keep one"
            )));
        }
        spec.insert(key.to_string(), Value::String(condition.clone()));
    }
    Ok(())
}

/// `POST /flagger/v1/check`.
pub async fn check(State(state): State<Arc<AppState>>, request: Request) -> Response {
    hook(&state, request, Hook::Check).await
}

/// `POST /flagger/v1/rollback`.
pub async fn rollback(State(state): State<Arc<AppState>>, request: Request) -> Response {
    hook(&state, request, Hook::Rollback).await
}

async fn hook(state: &Arc<AppState>, request: Request, hook: Hook) -> Response {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let bytes = match http::read_body(
        headers,
        body,
        state.settings.max_body_bytes,
        state.settings.request_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(r) => return http::refuse(headers, r),
    };
    let mut payload = match parse_payload(&bytes) {
        Ok(p) => p,
        Err(r) => return http::refuse(headers, r),
    };
    // The token is for authentication only: it never reaches the analysis or an answer.
    let token = payload.metadata.remove(TOKEN_KEY);
    if parts.extensions.get::<http::TokenInMetadata>().is_some() {
        if let Err(refusal) = state.auth.check_token(token.as_deref().map(str::as_bytes)) {
            return http::unauthorized(headers, refusal);
        }
    }
    let canary = format!("{}/{}", payload.namespace, payload.name);
    let planned = match selection(&payload) {
        Ok((selection, args)) => state.plan(selection, args).await,
        Err(r) => Err(r),
    };
    let plan = match planned {
        Ok(p) => p,
        Err(r) => {
            let mut response = http::refuse(headers, r);
            if let Some(note) = response.extensions_mut().get_mut::<AccessNote>() {
                note.canary = Some(canary);
            }
            return response;
        }
    };

    let revision = analysis::Revision {
        canary: canary.clone(),
        checksum: payload.checksum.clone(),
    };
    let outcome = analysis::measure(state, &plan, Some(&revision)).await;
    state.metrics.observe_verdict(hook.surface(), outcome.phase);
    let status = match hook {
        Hook::Check => check_status(outcome.phase),
        Hook::Rollback => rollback_status(outcome.phase),
    };
    let reason = outcome.reason();
    let mut response = if http::wants_json(headers) {
        let mut body = json!({
            "verdict": outcome.phase,
            "status": status.as_u16(),
            "reason": reason,
            "canary": {
                "name": payload.name,
                "namespace": payload.namespace,
                "phase": payload.phase,
                "checksum": payload.checksum,
            },
            "template": plan.template,
            "measurements": outcome.measurements_json(),
        });
        if hook == Hook::Rollback {
            body["rollback"] = Value::Bool(outcome.phase == Phase::Failed);
        }
        http::reply_json(status, &body)
    } else {
        http::reply_text(
            status,
            &match hook {
                Hook::Check => reason,
                Hook::Rollback if outcome.phase == Phase::Failed => format!("roll back: {reason}"),
                Hook::Rollback => format!("do not roll back: {reason}"),
            },
        )
    };
    response.extensions_mut().insert(AccessNote {
        template: plan.template,
        canary: Some(canary),
        verdict: Some(outcome.phase),
        refusal: None,
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(metadata: Value) -> Vec<u8> {
        json!({"name": "podinfo", "namespace": "test", "phase": "Progressing",
               "checksum": "6d8f5c", "metadata": metadata})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn status_codes_follow_the_mapping() {
        use Phase::*;
        let check: Vec<u16> = [Successful, Failed, Inconclusive, Error, Running]
            .map(|p| check_status(p).as_u16())
            .to_vec();
        assert_eq!(check, vec![200, 412, 409, 503, 409]);
        let rollback: Vec<u16> = [Successful, Failed, Inconclusive, Error, Running]
            .map(|p| rollback_status(p).as_u16())
            .to_vec();
        assert_eq!(rollback, vec![409, 200, 409, 503, 409]);
    }

    #[test]
    fn reads_flaggers_payload() {
        let p = parse_payload(&payload(json!({"template": "t", "args.service": "pay"}))).unwrap();
        assert_eq!(p.name, "podinfo");
        assert_eq!(p.phase, "Progressing");
        assert_eq!(p.metadata["args.service"], "pay");
        // Flagger omits empty metadata.
        let p = parse_payload(br#"{"name":"a","namespace":"b","phase":"Waiting","checksum":""}"#)
            .unwrap();
        assert!(p.metadata.is_empty());
    }

    #[test]
    fn wrong_types_are_400_with_the_key() {
        let e = parse_payload(&payload(json!({"args.count": 3}))).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.message
                .starts_with("metadata.args.count: expected a string"),
            "{}",
            e.message
        );
        let e = parse_payload(br#"{"namespace":"b"}"#).unwrap_err();
        assert!(e.message.starts_with("name: is required"), "{}", e.message);
        let e = parse_payload(br#"{"name":1,"namespace":"b"}"#).unwrap_err();
        assert!(e.message.contains("the number 1"), "{}", e.message);
        let e = parse_payload(br#"{"name":"a","namespace":"b","metadata":[]}"#).unwrap_err();
        assert!(
            e.message.starts_with("metadata: expected an object"),
            "{}",
            e.message
        );
    }

    #[test]
    fn metadata_selects_a_template_with_args() {
        let p = parse_payload(&payload(
            json!({"template": "error-rate", "metric": "ratio", "args.service": "pay", "args.name": "override"}),
        ))
        .unwrap();
        let (sel, args) = selection(&p).unwrap();
        match sel {
            Selection::Template { name, metric } => {
                assert_eq!(name, "error-rate");
                assert_eq!(metric.as_deref(), Some("ratio"));
            }
            other => panic!("{other:?}"),
        }
        // Canary name/namespace first, explicit args after (so they win).
        assert_eq!(
            args,
            vec![
                ("name".to_string(), "podinfo".to_string()),
                ("namespace".to_string(), "test".to_string()),
                ("name".to_string(), "override".to_string()),
                ("service".to_string(), "pay".to_string()),
            ]
        );
    }

    #[test]
    fn inline_specs_take_metadata_conditions() {
        let p = parse_payload(&payload(json!({
            "spec": "query: up\nnoData: fail\n",
            "successCondition": "result[0] == 1",
        })))
        .unwrap();
        let (sel, _) = selection(&p).unwrap();
        let Selection::Inline { spec, name } = sel else {
            panic!("not inline")
        };
        assert_eq!(name, INLINE_METRIC_NAME);
        assert_eq!(spec["successCondition"], "result[0] == 1");
    }

    #[test]
    fn bad_metadata_is_422_with_a_reason() {
        for (metadata, needle) in [
            (json!({}), "name a loaded template"),
            (json!({"template": "a", "spec": "query: up"}), "not both"),
            (json!({"templat": "a"}), "metadata.templat: unknown key"),
            (json!({"spec": "query: [up"}), "not valid YAML"),
            (json!({"spec": "- up"}), "expected a YAML mapping"),
            (
                json!({"template": "a", "successCondition": "true"}),
                "only for an inline spec",
            ),
            (
                json!({"spec": "successCondition: a\nquery: up", "successCondition": "b"}),
                "both in metadata",
            ),
            (json!({"args.": "x", "template": "a"}), "names no argument"),
        ] {
            let p = parse_payload(&payload(metadata.clone())).unwrap();
            let e = selection(&p).unwrap_err();
            assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY, "{metadata}");
            assert!(e.message.contains(needle), "{metadata}: {}", e.message);
        }
    }
}
