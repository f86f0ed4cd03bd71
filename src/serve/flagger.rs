//! Flagger's webhooks: `POST /flagger/v1/check` and `POST /flagger/v1/rollback`.
//!
//! Flagger posts `{name, namespace, phase, checksum, metadata}` (metadata values are strings)
//! and passes a hook on 200-202 only. What a failing hook does depends on its type, which the
//! payload does not carry: a `rollout` or `pre-rollout` failure is a failed check counted
//! against `threshold`, a `confirm-*` failure pauses, a `rollback` pass rolls back. So the
//! Canary names the type in `metadata.hook` and [`Audience`] answers each verdict in the
//! terms of that hook (docs/serve.md, "Hook types"). Flagger keeps a 4xx body in the events of
//! rollout, pre- and post-rollout hooks; a retried 5xx's body is drained. The metadata selects
//! the analysis:
//!
//! - `hook: TYPE` (`rollout`, `pre-rollout`, `post-rollout`, `confirm-rollout`,
//!   `confirm-traffic-increase`, `confirm-promotion`, `rollback`); without it `/check` answers
//!   Successful 200, Failed 412, Inconclusive 409, Error 503 as before hook types;
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
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::analysis::{self, Audience, Selection, INLINE_METRIC_NAME};
use super::http::{self, AccessNote, Rejection};
use super::AppState;
use crate::measurement::Phase;
use crate::spec::parse_request_yaml;

/// The metadata key that carries the bearer token when authentication is on (Flagger's
/// webhooks cannot send headers).
pub const TOKEN_KEY: &str = "token";

/// The metadata keys the webhook reads (besides `args.*` and `token`).
const KEYS: [&str; 6] = [
    HOOK_KEY,
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

/// Which endpoint was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `/flagger/v1/check`: any hook type, named by `metadata.hook`.
    Check,
    /// `/flagger/v1/rollback`: the `rollback` hook.
    Rollback,
}

/// Flagger's hook types that ask a question (v1.44 `pkg/apis/flagger/v1beta1/canary.go`,
/// `HookType`; `event` hooks only carry Flagger's events and are not served). Flagger does not
/// send the type, so the Canary says it again in `metadata.hook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookType {
    /// `rollout`: every interval of the analysis; a failure is a failed check.
    Rollout,
    /// `pre-rollout`: before traffic moves; a failure is a failed check.
    PreRollout,
    /// `post-rollout`: after promotion or rollback; a failure is only an event.
    PostRollout,
    /// `confirm-rollout`: before the analysis starts; a failure waits.
    ConfirmRollout,
    /// `confirm-traffic-increase`: before each weight step; a failure halts the step.
    ConfirmTrafficIncrease,
    /// `confirm-promotion`: before promotion; a failure waits in `WaitingPromotion`.
    ConfirmPromotion,
    /// `rollback`: a pass rolls back.
    Rollback,
}

impl HookType {
    /// Every type with its name in a Canary.
    pub const ALL: [(HookType, &'static str); 7] = [
        (HookType::Rollout, "rollout"),
        (HookType::PreRollout, "pre-rollout"),
        (HookType::PostRollout, "post-rollout"),
        (HookType::ConfirmRollout, "confirm-rollout"),
        (HookType::ConfirmTrafficIncrease, "confirm-traffic-increase"),
        (HookType::ConfirmPromotion, "confirm-promotion"),
        (HookType::Rollback, "rollback"),
    ];

    /// The type's name in a Canary (`rollout`, `confirm-promotion`, ...).
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("rollout", |(_, n)| n)
    }

    /// Reads `metadata.hook`.
    pub fn parse(value: &str) -> Result<HookType, Rejection> {
        let value = value.trim();
        if let Some((t, _)) = Self::ALL.iter().find(|(_, n)| *n == value) {
            return Ok(*t);
        }
        let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
        let hint = if value == "event" {
            " (event hooks carry Flagger's events, not questions)"
        } else {
            ""
        };
        Err(Rejection::unprocessable(format!(
            "metadata.{HOOK_KEY}: unknown hook type {value:?}{hint}; it names the webhook's type: {}",
            names.join(", ")
        )))
    }

    /// How Flagger reads this hook's status code (v1.44 `scheduler.go` `advanceCanary`,
    /// `runAnalysis`; `scheduler_hooks.go`).
    pub(crate) fn audience(self) -> Audience {
        match self {
            HookType::Rollout | HookType::PreRollout => Audience::FlaggerCounted,
            HookType::PostRollout => Audience::FlaggerCheck,
            HookType::ConfirmRollout
            | HookType::ConfirmTrafficIncrease
            | HookType::ConfirmPromotion => Audience::FlaggerGate,
            HookType::Rollback => Audience::FlaggerRollback,
        }
    }
}

/// Whom the answer is for: the endpoint and `metadata.hook` together. Without `hook`,
/// `/flagger/v1/check` keeps the codes it had before hook types (200/412/409/503) and
/// `/flagger/v1/rollback` is the rollback hook; the rollback endpoint takes no other type.
pub(crate) fn audience(endpoint: Endpoint, hook: Option<HookType>) -> Result<Audience, Rejection> {
    match (endpoint, hook) {
        (Endpoint::Check, None) => Ok(Audience::FlaggerCheck),
        (Endpoint::Rollback, None | Some(HookType::Rollback)) => Ok(Audience::FlaggerRollback),
        (Endpoint::Rollback, Some(other)) => Err(Rejection::unprocessable(format!(
            "metadata.{HOOK_KEY}: {:?} on /flagger/v1/rollback, which serves the rollback hook; point a {} hook at /flagger/v1/check",
            other.name(),
            other.name()
        ))),
        (Endpoint::Check, Some(t)) => Ok(t.audience()),
    }
}

/// The metadata key that names the hook's type.
pub const HOOK_KEY: &str = "hook";

/// Reads Flagger's payload: `name` and `namespace` required, `phase` and `checksum` optional
/// strings, `metadata` an optional object of strings. Other keys are ignored (Flagger may add
/// some).
pub fn parse_payload(bytes: &[u8]) -> Result<Payload, Rejection> {
    match WellFormed::read(bytes) {
        Some(payload) => Ok(payload),
        None => from_tree(bytes),
    }
}

/// [`parse_payload`] through a JSON tree: every body, the refusals worded.
fn from_tree(bytes: &[u8]) -> Result<Payload, Rejection> {
    let mut map = http::parse_object(bytes)?;
    // Values are moved out of the parsed object, not copied.
    let mut string = |key: &str, required: bool| -> Result<String, Rejection> {
        match map.remove(key) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) if !required => Ok(String::new()),
            None | Some(Value::Null) => Err(Rejection::bad_request(format!(
                "{key}: is required (Flagger sends the canary's {key})"
            ))),
            Some(other) => Err(Rejection::bad_request(format!(
                "{key}: expected a string, got {}",
                http::describe(&other)
            ))),
        }
    };
    let name = string("name", true)?;
    let namespace = string("namespace", true)?;
    let phase = string("phase", false)?;
    let checksum = string("checksum", false)?;
    let mut metadata = BTreeMap::new();
    match map.remove("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(entries)) => {
            for (k, v) in entries {
                match v {
                    Value::String(s) => {
                        metadata.insert(k, s);
                    }
                    other => {
                        return Err(Rejection::bad_request(format!(
                            "metadata.{k}: expected a string (Flagger metadata values are strings; quote it in the Canary), got {}",
                            http::describe(&other)
                        )))
                    }
                }
            }
        }
        Some(other) => {
            return Err(Rejection::bad_request(format!(
                "metadata: expected an object of strings, got {}",
                http::describe(&other)
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

/// A payload as Flagger sends it, read straight into its fields: every check pays for the
/// payload, and a JSON tree built first and taken apart after cost twice the instructions.
/// Anything else (a missing name, a value of the wrong type, a repeated key, not an object)
/// is left to the tree, whose refusals name the key and what was found.
#[derive(serde::Deserialize)]
struct WellFormed {
    name: Option<String>,
    namespace: Option<String>,
    phase: Option<String>,
    checksum: Option<String>,
    metadata: Option<BTreeMap<String, String>>,
}

impl WellFormed {
    fn read(bytes: &[u8]) -> Option<Payload> {
        // A derived struct also reads a JSON array by position: only objects come this way.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let wire: WellFormed = serde_json::from_slice(bytes).ok()?;
        Some(Payload {
            name: wire.name?,
            namespace: wire.namespace?,
            phase: wire.phase.unwrap_or_default(),
            checksum: wire.checksum.unwrap_or_default(),
            metadata: wire.metadata.unwrap_or_default(),
        })
    }
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
                "metadata.{key}: unknown key; the webhook reads {}, {TOKEN_KEY} and args.NAME",
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
pub(crate) async fn check(State(state): State<Arc<AppState>>, request: Request) -> Response {
    hook(&state, request, Endpoint::Check).await
}

/// `POST /flagger/v1/rollback`.
pub(crate) async fn rollback(State(state): State<Arc<AppState>>, request: Request) -> Response {
    hook(&state, request, Endpoint::Rollback).await
}

/// The `metadata.token` of a body, if it has one, read without judging anything else of it
/// (any body that is not a JSON object with a string there has none).
fn token_in(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Body {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        token: Option<String>,
    }
    serde_json::from_slice::<Body>(bytes).ok()?.metadata?.token
}

/// The hook's type (`metadata.hook`), whom the answer is for, and the analysis to run.
async fn prepare(
    state: &Arc<AppState>,
    endpoint: Endpoint,
    payload: &Payload,
) -> Result<(Option<HookType>, Audience, analysis::Plan), Rejection> {
    let hook_type = payload
        .metadata
        .get(HOOK_KEY)
        .map(|v| HookType::parse(v))
        .transpose()?;
    let audience = audience(endpoint, hook_type)?;
    let (selection, args) = selection(payload)?;
    let plan = state.plan(selection, args).await?;
    Ok((hook_type, audience, plan))
}

async fn hook(state: &Arc<AppState>, request: Request, endpoint: Endpoint) -> Response {
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
    // Authenticated before the payload is read: a caller without the token learns nothing
    // about what the server would make of its body, not even that it is malformed.
    if parts.extensions.get::<http::TokenInMetadata>().is_some() {
        let token = token_in(&bytes);
        if let Err(refusal) = state.auth.check_token(token.as_deref().map(str::as_bytes)) {
            return http::unauthorized(headers, refusal);
        }
    }
    let mut payload = match parse_payload(&bytes) {
        Ok(p) => p,
        Err(r) => return http::refuse(headers, r),
    };
    // The token is for authentication only: it never reaches the analysis or an answer.
    payload.metadata.remove(TOKEN_KEY);
    let canary = format!("{}/{}", payload.namespace, payload.name);
    let planned = prepare(state, endpoint, &payload).await;
    let (hook_type, audience, plan) = match planned {
        Ok(p) => p,
        Err(r) => {
            let mut response = http::refuse(headers, r);
            if let Some(note) = response.extensions_mut().get_mut::<AccessNote>() {
                note.canary = Some(canary);
            }
            return response;
        }
    };

    // Flagger does not say which call of its analysis this is: every call about one revision
    // of one canary belongs to one run (the engine's run tracker places it).
    let run = format!("flagger {canary}@{}", payload.checksum);
    let outcome = analysis::measure(state, &plan, Some(&run)).await;
    let rollback = audience == Audience::FlaggerRollback;
    let surface = if rollback {
        "flagger_rollback"
    } else {
        "flagger_check"
    };
    state.metrics.observe_verdict(surface, outcome.phase);
    let status = audience.status(outcome.phase);
    let reason = outcome.reason();
    let mut response = if http::wants_json(headers) {
        let mut body = json!({
            "verdict": outcome.phase,
            "status": status.as_u16(),
            "reason": reason,
            "hook": hook_type.map(HookType::name),
            "canary": {
                "name": payload.name,
                "namespace": payload.namespace,
                "phase": payload.phase,
                "checksum": payload.checksum,
            },
            "template": plan.template,
            "measurements": analysis::measurements_json(&outcome),
        });
        if rollback {
            body["rollback"] = Value::Bool(outcome.phase == Phase::Failed);
        }
        http::reply_json(status, &body)
    } else {
        http::reply_text(
            status,
            &if !rollback {
                reason
            } else if outcome.phase == Phase::Failed {
                format!("roll back: {reason}")
            } else {
                format!("do not roll back: {reason}")
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
    use axum::http::StatusCode;

    fn payload(metadata: Value) -> Vec<u8> {
        json!({"name": "podinfo", "namespace": "test", "phase": "Progressing",
               "checksum": "6d8f5c", "metadata": metadata})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn hook_types_choose_how_flagger_reads_the_code() {
        use Audience::*;
        let on_check = |t: &str| audience(Endpoint::Check, Some(HookType::parse(t).unwrap()));
        assert_eq!(audience(Endpoint::Check, None).unwrap(), FlaggerCheck);
        assert_eq!(on_check("rollout").unwrap(), FlaggerCounted);
        assert_eq!(on_check("pre-rollout").unwrap(), FlaggerCounted);
        assert_eq!(on_check("post-rollout").unwrap(), FlaggerCheck);
        for gate in [
            "confirm-rollout",
            "confirm-traffic-increase",
            "confirm-promotion",
        ] {
            assert_eq!(on_check(gate).unwrap(), FlaggerGate, "{gate}");
        }
        assert_eq!(on_check("rollback").unwrap(), FlaggerRollback);
        assert_eq!(audience(Endpoint::Rollback, None).unwrap(), FlaggerRollback);
        let e = audience(Endpoint::Rollback, Some(HookType::Rollout)).unwrap_err();
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.message.contains("/flagger/v1/check"), "{}", e.message);
        for (t, name) in HookType::ALL {
            assert_eq!(t.name(), name);
        }
        let e = HookType::parse("event").unwrap_err();
        assert!(
            e.message
                .starts_with("metadata.hook: unknown hook type \"event\" (event hooks"),
            "{}",
            e.message
        );
        let e = HookType::parse("rolout").unwrap_err();
        assert!(e.message.contains("confirm-promotion"), "{}", e.message);
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

    proptest::proptest! {
        /// Whatever the direct reading accepts, the tree reads the same way: repeated keys,
        /// nulls, arrays, extra keys and escapes included.
        #[test]
        fn the_direct_reading_agrees_with_the_tree(
            pairs in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["name", "namespace", "phase", "checksum", "metadata", "extra"]),
                    proptest::sample::select(vec![
                        r#""a""#, r#""b\u00fc\"""#, "null", "1", "[]", r#"["x","y"]"#, "{}",
                        r#"{"template":"t","args.x":"1"}"#, r#"{"k":"1","k":"2"}"#, r#"{"k":1}"#,
                        r#"{"k":null}"#,
                    ]),
                ),
                0..8,
            ),
            as_array in proptest::bool::ANY,
        ) {
            let body = if as_array {
                format!("[{}]", pairs.iter().map(|(_, v)| *v).collect::<Vec<_>>().join(","))
            } else {
                let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!(" {{{}}}", fields.join(","))
            };
            if let Some(direct) = WellFormed::read(body.as_bytes()) {
                proptest::prop_assert_eq!(from_tree(body.as_bytes()).ok(), Some(direct), "{}", body);
            }
        }
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
            (json!({"tokn": "a"}), ", token and args.NAME"),
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
