//! HTTP plumbing shared by the endpoints: refusals with their status codes, content
//! negotiation (plain text or JSON), bounded body reading, and the note a handler leaves for
//! the access log.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};

use super::auth::Refusal;
use crate::measurement::Phase;

/// A request refused before any analysis: a status code and a reason for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// A 4xx code (or 503 while shutting down).
    pub status: StatusCode,
    /// One sentence; never contains a secret.
    pub message: String,
}

impl Rejection {
    /// 400: the body is not what the endpoint reads (malformed JSON, wrong types).
    pub fn bad_request(message: impl Into<String>) -> Rejection {
        Rejection {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    /// 422: well-formed, but it names nothing usable (unknown template, invalid spec).
    pub fn unprocessable(message: impl Into<String>) -> Rejection {
        Rejection {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            message: message.into(),
        }
    }
}

/// What a handler tells the access log about the request it served.
#[derive(Debug, Clone, Default)]
pub(crate) struct AccessNote {
    /// The template used, if any.
    pub template: Option<String>,
    /// `namespace/name` of a Flagger canary.
    pub canary: Option<String>,
    /// The overall verdict, when one was reached.
    pub verdict: Option<Phase>,
    /// Why the request was refused, for 4xx answers.
    pub refusal: Option<String>,
}

/// Whether the caller asked for JSON (`Accept: application/json`).
pub(crate) fn wants_json(headers: &HeaderMap) -> bool {
    const JSON: &[u8] = b"application/json";
    headers.get_all(header::ACCEPT).iter().any(|v| {
        v.as_bytes()
            .windows(JSON.len())
            .any(|w| w.eq_ignore_ascii_case(JSON))
    })
}

/// An answer as plain text (one line) or as the given JSON.
pub(crate) fn reply(status: StatusCode, json: bool, text: &str, body: Value) -> Response {
    if json {
        reply_json(status, &body)
    } else {
        reply_text(status, text)
    }
}

/// A JSON answer.
pub(crate) fn reply_json(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

/// A one-line plain-text answer.
pub(crate) fn reply_text(status: StatusCode, text: &str) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        format!("{text}\n"),
    )
        .into_response()
}

/// The answer to a refused request (JSON when the caller asked for it), with the refusal
/// noted for the access log.
pub(crate) fn refuse(headers: &HeaderMap, rejection: Rejection) -> Response {
    refuse_with(wants_json(headers), rejection)
}

/// The answer to a refused request, as JSON or plain text.
pub(crate) fn refuse_with(as_json: bool, rejection: Rejection) -> Response {
    let json = json!({"error": rejection.message, "status": rejection.status.as_u16()});
    let mut response = reply(rejection.status, as_json, &rejection.message, json);
    response.extensions_mut().insert(AccessNote {
        refusal: Some(rejection.message),
        ..AccessNote::default()
    });
    response
}

/// Marks a Flagger request without an `Authorization` header while authentication is on: its
/// handler must find the token in the payload's metadata (`token`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokenInMetadata;

/// 401 for a request without a valid token.
pub(crate) fn unauthorized(headers: &HeaderMap, refusal: Refusal) -> Response {
    let mut response = refuse(
        headers,
        Rejection {
            status: StatusCode::UNAUTHORIZED,
            message: refusal.reason().to_string(),
        },
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"rollgate\""),
    );
    response
}

/// Reads a request body of at most `limit` bytes within `timeout`: 413 above the limit
/// (announced or actual), 408 when the client is too slow, 400 when the connection fails.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, Rejection> {
    let too_large = || Rejection {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!("request body larger than the limit of {limit} bytes (--max-body-bytes)"),
    };
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf: Vec<u8> = Vec::with_capacity(
            announced.map_or(0, |n| usize::try_from(n).unwrap_or(limit).min(limit)),
        );
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                Rejection::bad_request(format!("cannot read the request body: {e}"))
            })?;
            if buf.len() + chunk.len() > limit {
                return Err(too_large());
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buf))
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(result) => result,
        Err(_) => Err(Rejection {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!("the request body did not arrive within {timeout:?}"),
        }),
    }
}

/// Describes a JSON value's type for error messages (`the number 3`).
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Parses a JSON object body, with a reason a person can act on when it is not one.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, Rejection> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Rejection::bad_request(
            "empty request body: expected a JSON object",
        ));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(Rejection::bad_request(format!(
            "expected a JSON object, got {}",
            describe(&other)
        ))),
        Err(e) => Err(Rejection::bad_request(format!("malformed JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_selects_json() {
        let mut h = HeaderMap::new();
        assert!(!wants_json(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(!wants_json(&h));
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html, Application/JSON;q=0.9"),
        );
        assert!(wants_json(&h));
    }

    #[test]
    fn bodies_that_are_not_objects_are_named() {
        assert!(parse_object(b"  ").unwrap_err().message.contains("empty"));
        assert!(parse_object(b"[1]").unwrap_err().message.contains("a list"));
        let e = parse_object(b"{\"name\": ").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("malformed JSON"), "{}", e.message);
        assert!(parse_object(b"{\"a\": 1}").is_ok());
    }

    #[tokio::test]
    async fn body_limit_applies_to_announced_and_actual_sizes() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("11"));
        let e = read_body(&h, Body::from("x".repeat(11)), 10, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        let e = read_body(
            &HeaderMap::new(),
            Body::from("x".repeat(11)),
            10,
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
        let ok = read_body(
            &HeaderMap::new(),
            Body::from("x".repeat(10)),
            10,
            Duration::from_secs(1),
        )
        .await
        .unwrap();
        assert_eq!(ok.len(), 10);
    }
}
