//! The live client against stub HTTP servers on 127.0.0.1.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support::stub::{json, vector_body, Reply, Stub};
use chrono::{TimeZone, Utc};
use rollgate::prometheus::{
    BasicAuth, Client, PrometheusConfig, PrometheusError, QueryData, QueryRequest, QueryResponse,
};
use tokio::time::Instant;

fn cfg(address: String) -> PrometheusConfig {
    PrometheusConfig {
        timeout: Duration::from_secs(5),
        ..PrometheusConfig::new(address)
    }
}

fn up() -> QueryRequest {
    QueryRequest::instant("up", None)
}

fn first_value(r: &QueryResponse) -> f64 {
    match &r.data {
        QueryData::Vector(v) => v[0].sample.value,
        QueryData::Scalar(s) => s.value,
        QueryData::Matrix(m) => m[0].samples[0].value,
    }
}

/// Display and Debug of `e` contain none of `secrets`.
fn assert_no_secret(e: &PrometheusError, secrets: &[&str]) {
    let shown = format!("{e} | {e:?}");
    for s in secrets {
        assert!(!shown.contains(s), "secret {s:?} leaked: {shown}");
    }
}

#[tokio::test]
async fn instant_query_request_shape() {
    let stub = Stub::script(|_, _| json(200, &vector_body("1.5")));
    let mut c = cfg(format!("{}/prom/", stub.url));
    c.headers = vec![
        ("X-Scope-OrgID".into(), "team-a".into()),
        ("X-Extra".into(), "1".into()),
    ];
    let q = r#"sum(rate(http_requests_total{code=~"5..",path="/a&b=c+d"}[5m]))"#;
    let t = Utc.timestamp_millis_opt(1_712_345_678_250).unwrap();
    let r = Client::new()
        .query(&c, &QueryRequest::instant(q, Some(t)), None)
        .await
        .unwrap();
    assert_eq!(first_value(&r), 1.5);
    let req = stub.request(0);
    assert_eq!(req.method, "POST");
    assert_eq!(req.path(), "/prom/api/v1/query");
    assert_eq!(
        req.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(req.header("x-scope-orgid"), Some("team-a"));
    assert_eq!(req.header("x-extra"), Some("1"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.param("query").as_deref(), Some(q));
    assert_eq!(req.param("time").as_deref(), Some("1712345678.250"));
    assert_eq!(req.param("partial_response").as_deref(), Some("false"));
    assert_eq!(req.param("deny_partial_response").as_deref(), Some("1"));
}

#[tokio::test]
async fn localhost_resolves() {
    let stub = Stub::script(|_, _| json(200, &vector_body("9")));
    let c = cfg(format!("http://localhost:{}", stub.addr.port()));
    let r = Client::new().query(&c, &up(), None).await.unwrap();
    assert_eq!(first_value(&r), 9.0);
}

#[tokio::test]
async fn range_query_returns_matrix() {
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"pod":"a"},"values":[[1700000000,"1"],[1700000060,"+Inf"]]},
        {"metric":{"pod":"b"},"values":[[1700000000,"-Inf"]]}]}}"#;
    let stub = Stub::script(move |_, _| json(200, body));
    let req = QueryRequest::Range {
        query: "rate(x[1m])".into(),
        start: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        end: Utc.timestamp_opt(1_700_000_060, 0).unwrap(),
        step: Duration::from_secs(60),
    };
    let r = Client::new()
        .query(&cfg(stub.url.clone()), &req, None)
        .await
        .unwrap();
    let QueryData::Matrix(m) = &r.data else {
        panic!("{r:?}")
    };
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].labels.get("pod"), Some("a"));
    assert_eq!(m[0].samples[1].value, f64::INFINITY);
    assert_eq!(m[1].samples[0].value, f64::NEG_INFINITY);
    let sent = stub.request(0);
    assert_eq!(sent.path(), "/api/v1/query_range");
    assert_eq!(sent.param("start").as_deref(), Some("1700000000"));
    assert_eq!(sent.param("end").as_deref(), Some("1700000060"));
    assert_eq!(sent.param("step").as_deref(), Some("60"));
    assert_eq!(sent.param("partial_response").as_deref(), Some("false"));
    assert_eq!(sent.param("deny_partial_response").as_deref(), Some("1"));
}

#[tokio::test]
async fn scalar_nan_and_warnings() {
    let stub = Stub::script(|_, i| {
        if i == 0 {
            json(
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]},"warnings":["store A unreachable"]}"#,
            )
        } else {
            json(200, &vector_body("+Inf"))
        }
    });
    let client = Client::new();
    let r = client
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap();
    assert!(first_value(&r).is_nan());
    assert_eq!(r.warnings, vec!["store A unreachable"]);
    let r = client
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap();
    assert_eq!(first_value(&r), f64::INFINITY);
    assert!(r.warnings.is_empty());
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = cfg(format!("http://bob:pw-999@127.0.0.1:{port}"));
    let started = Instant::now();
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(e, PrometheusError::Connect { .. }), "{e:?}");
    assert!(e.is_retryable());
    // Two retries: 100 ms + 200 ms of backoff.
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert!(
        e.to_string().contains(&format!("http://127.0.0.1:{port}")),
        "{e}"
    );
    assert_no_secret(&e, &["pw-999", "bob"]);
}

#[tokio::test]
async fn silent_server_times_out_per_attempt() {
    let stub = Stub::script(|_, _| Reply::Silent);
    let mut c = cfg(stub.url.clone());
    c.timeout = Duration::from_millis(300);
    c.retries = 1;
    let started = Instant::now();
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(e, PrometheusError::Timeout { .. }), "{e:?}");
    assert_eq!(stub.requests(), 2);
    // timeout * (retries + 1) + one 100 ms backoff, plus slack.
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(700 + 1000), "{elapsed:?}");
    assert!(e.to_string().contains("300ms"), "{e}");
}

#[tokio::test]
async fn deadline_cuts_attempts_and_retries_short() {
    let stub = Stub::script(|_, _| Reply::Silent);
    let mut c = cfg(stub.url.clone());
    c.timeout = Duration::from_secs(10);
    c.retries = 5;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(400);
    let e = Client::new()
        .query(&c, &up(), Some(deadline))
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(e, PrometheusError::Timeout { .. }), "{e:?}");
    assert!(elapsed < Duration::from_millis(400 + 500), "{elapsed:?}");
    assert_eq!(stub.requests(), 1);

    let stub = Stub::script(|_, _| json(503, "busy"));
    let mut c = cfg(stub.url.clone());
    c.retries = 10;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(500);
    let e = Client::new()
        .query(&c, &up(), Some(deadline))
        .await
        .unwrap_err();
    assert!(
        matches!(e, PrometheusError::Http { status: 503, .. }),
        "{e:?}"
    );
    // Attempts at ~0, ~100 and ~300 ms; the next backoff (400 ms) would pass the deadline.
    assert_eq!(stub.requests(), 3);
    assert!(started.elapsed() < Duration::from_millis(500));

    let past = Instant::now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let e = Client::new()
        .query(&c, &up(), Some(past))
        .await
        .unwrap_err();
    assert!(matches!(e, PrometheusError::Timeout { .. }), "{e:?}");
    assert_eq!(stub.requests(), 3);
}

#[tokio::test]
async fn http_500_is_not_retried() {
    let stub = Stub::script(|_, _| Reply::Full {
        status: 500,
        body: b"<html>oops</html>".to_vec(),
    });
    let e = Client::new()
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap_err();
    match &e {
        PrometheusError::Http {
            status: 500,
            excerpt,
            ..
        } => assert_eq!(excerpt, "<html>oops</html>"),
        other => panic!("{other:?}"),
    }
    assert_eq!(stub.requests(), 1);
}

#[tokio::test]
async fn redirects_are_reported_not_followed() {
    // Argo's Go client would follow; a POST turned into a GET loses its query on the way, and
    // a login page answers 200 with HTML, so rollgate names the redirect and its target.
    let elsewhere = Stub::script(|_, _| json(200, &vector_body("1")));
    for status in [301, 302, 307, 308] {
        let target = format!("{}/api/v1/query", elsewhere.url);
        let stub = Stub::script(move |_, _| Reply::Redirect {
            status,
            location: target.clone(),
        });
        let e = Client::new()
            .query(&cfg(stub.url.clone()), &up(), None)
            .await
            .unwrap_err();
        match &e {
            PrometheusError::Http {
                status: s, excerpt, ..
            } if *s == status => assert!(excerpt.contains(&elsewhere.url), "{excerpt}"),
            other => panic!("{status}: {other:?}"),
        }
        assert!(e.to_string().contains("does not follow redirects"), "{e}");
        assert_eq!(stub.requests(), 1, "{status}: not retried");
    }
    assert_eq!(elsewhere.requests(), 0);
}

#[tokio::test]
async fn retry_after_503_succeeds() {
    let stub = Stub::script(|_, i| {
        if i == 0 {
            json(
                503,
                r#"{"status":"error","errorType":"unavailable","error":"overloaded"}"#,
            )
        } else {
            json(200, &vector_body("7"))
        }
    });
    let r = Client::new()
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap();
    assert_eq!(first_value(&r), 7.0);
    assert_eq!(stub.requests(), 2);
}

#[tokio::test]
async fn persistent_503_makes_bounded_attempts() {
    let stub = Stub::script(|_, _| {
        json(
            503,
            r#"{"status":"error","errorType":"timeout","error":"query timed out"}"#,
        )
    });
    let mut c = cfg(stub.url.clone());
    c.retries = 3;
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert_eq!(stub.requests(), 4);
    match &e {
        PrometheusError::Api {
            status: 503,
            error_type,
            message,
            ..
        } => {
            assert_eq!(error_type, "timeout");
            assert_eq!(message, "query timed out");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_data_is_not_retried() {
    let stub = Stub::script(|_, _| {
        json(
            400,
            r#"{"status":"error","errorType":"bad_data","error":"1:4: parse error: unclosed left parenthesis"}"#,
        )
    });
    let e = Client::new()
        .query(
            &cfg(stub.url.clone()),
            &QueryRequest::instant("sum(", None),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(stub.requests(), 1);
    match &e {
        PrometheusError::Api {
            status: 400,
            error_type,
            message,
            ..
        } => {
            assert_eq!(error_type, "bad_data");
            assert!(message.contains("unclosed left parenthesis"));
        }
        other => panic!("{other:?}"),
    }
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn malformed_and_truncated_bodies() {
    let stub = Stub::script(|_, _| json(200, r#"{"status":"success","data":{"resultType":"vec"#));
    let e = Client::new()
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, PrometheusError::Malformed { .. }), "{e:?}");
    assert_eq!(stub.requests(), 1);

    // Connection closed before Content-Length bytes arrived: a transport error, never data.
    let stub = Stub::script(|_, _| Reply::Truncated {
        declared: 1000,
        body: vector_body("1").into_bytes(),
    });
    let mut c = cfg(stub.url.clone());
    c.retries = 0;
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(matches!(e, PrometheusError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("broke off"), "{e}");

    // Close-delimited body cut in the middle of the JSON.
    let stub = Stub::script(|_, _| Reply::CloseDelimited {
        status: 200,
        body: vector_body("1").as_bytes()[..40].to_vec(),
    });
    let e = Client::new()
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, PrometheusError::Malformed { .. }), "{e:?}");
}

#[tokio::test]
async fn size_cap_declared_and_streamed() {
    let stub = Stub::script(|_, _| json(200, &format!("{}{}", vector_body("1"), " ".repeat(5000))));
    let mut c = cfg(stub.url.clone());
    c.max_response_bytes = Some(4096);
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(
        matches!(e, PrometheusError::TooLarge { limit: 4096, .. }),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    assert_eq!(stub.requests(), 1);

    // No Content-Length: the running count trips the cap.
    let stub = Stub::script(|_, _| Reply::Chunked {
        status: 200,
        chunks: 100,
        size: 1000,
    });
    let mut c = cfg(stub.url.clone());
    c.max_response_bytes = Some(10_000);
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(
        matches!(e, PrometheusError::TooLarge { limit: 10_000, .. }),
        "{e:?}"
    );

    // Just under the cap is fine.
    let body = vector_body("2");
    let len = body.len() as u64;
    let stub = Stub::script(move |_, _| json(200, &body));
    let mut c = cfg(stub.url.clone());
    c.max_response_bytes = Some(len);
    let r = Client::new().query(&c, &up(), None).await.unwrap();
    assert_eq!(first_value(&r), 2.0);
}

#[tokio::test]
async fn string_result_is_rejected() {
    let stub = Stub::script(|_, _| {
        json(
            200,
            r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#,
        )
    });
    let e = Client::new()
        .query(&cfg(stub.url.clone()), &up(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PrometheusError::UnsupportedResultType { result_type, .. } if result_type == "string"),
        "{e:?}"
    );
}

#[tokio::test]
async fn bearer_token_is_reread_on_every_request() {
    let stub = Stub::script(|req, _| match req.header("authorization") {
        Some("Bearer tok-one") => json(200, &vector_body("1")),
        Some("Bearer tok-two") => json(200, &vector_body("2")),
        other => json(
            401,
            &format!(
                r#"{{"status":"error","errorType":"unauthorized","error":"bad credentials {}"}}"#,
                other.unwrap_or("none")
            ),
        ),
    });
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok-one\n").unwrap();
    let mut c = cfg(stub.url.clone());
    c.bearer_token_file = Some(token.clone());
    let client = Client::new();
    assert_eq!(
        first_value(&client.query(&c, &up(), None).await.unwrap()),
        1.0
    );
    std::fs::write(&token, "  tok-two  \n").unwrap();
    assert_eq!(
        first_value(&client.query(&c, &up(), None).await.unwrap()),
        2.0
    );

    // A token the server rejects and echoes back: the error must not carry it.
    std::fs::write(&token, "tok-three").unwrap();
    let e = client.query(&c, &up(), None).await.unwrap_err();
    assert!(
        matches!(e, PrometheusError::Api { status: 401, .. }),
        "{e:?}"
    );
    assert_no_secret(&e, &["tok-three"]);
    assert!(format!("{c:?}").contains("token"), "the path is shown");

    std::fs::remove_file(&token).unwrap();
    let e = client.query(&c, &up(), None).await.unwrap_err();
    assert!(matches!(e, PrometheusError::Config(_)), "{e:?}");
    assert!(e.to_string().contains(&token.display().to_string()), "{e}");
    assert_eq!(stub.requests(), 3);
}

#[tokio::test]
async fn basic_auth_from_password_file_and_from_url() {
    let stub = Stub::script(|req, _| {
        let alice = format!("Basic {}", crate::support::stub::base64(b"alice:s3cr3t pw"));
        let bob = format!("Basic {}", crate::support::stub::base64(b"bob@corp:p:w/1"));
        match req.header("authorization") {
            Some(h) if h == alice => json(200, &vector_body("1")),
            Some(h) if h == bob => json(200, &vector_body("2")),
            _ => json(401, "denied"),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "s3cr3t pw\n").unwrap();
    let mut c = cfg(stub.url.clone());
    c.basic_auth = Some(BasicAuth {
        username: "alice".into(),
        password_file: pw.clone(),
    });
    let client = Client::new();
    assert_eq!(
        first_value(&client.query(&c, &up(), None).await.unwrap()),
        1.0
    );
    std::fs::write(&pw, "changed").unwrap();
    let e = client.query(&c, &up(), None).await.unwrap_err();
    assert!(
        matches!(e, PrometheusError::Http { status: 401, .. }),
        "{e:?}"
    );
    assert_no_secret(&e, &["changed", "s3cr3t"]);

    let c = cfg(format!("http://bob%40corp:p%3Aw%2F1@{}", stub.addr));
    assert_eq!(
        first_value(&client.query(&c, &up(), None).await.unwrap()),
        2.0
    );
    assert!(!format!("{c:?}").contains("p%3Aw"));
}

#[tokio::test]
async fn sensitive_headers_never_surface() {
    let stub = Stub::script(|req, _| {
        // A misbehaving proxy that echoes the request headers into an error page.
        json(502, &format!("bad gateway: {:?}", req.headers))
    });
    let mut c = cfg(stub.url.clone());
    c.retries = 0;
    c.headers = vec![
        ("Authorization".into(), "Bearer hdr-secret-1".into()),
        ("X-Scope-OrgID".into(), "team-a".into()),
    ];
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(
        matches!(e, PrometheusError::Http { status: 502, .. }),
        "{e:?}"
    );
    assert_no_secret(&e, &["hdr-secret-1"]);
    assert!(stub.request(0).header("authorization") == Some("Bearer hdr-secret-1"));
    assert!(!format!("{c:?}").contains("hdr-secret-1"));
}

#[tokio::test]
async fn method_not_allowed_falls_back_to_get() {
    let stub = Stub::script(|req, _| {
        if req.method == "POST" {
            json(405, "method not allowed")
        } else {
            json(200, &vector_body("3"))
        }
    });
    let r = Client::new()
        .query(
            &cfg(stub.url.clone()),
            &QueryRequest::instant("a + b", None),
            None,
        )
        .await
        .unwrap();
    assert_eq!(first_value(&r), 3.0);
    assert_eq!(stub.requests(), 2);
    let get = stub.request(1);
    assert_eq!(get.method, "GET");
    assert_eq!(get.path(), "/api/v1/query");
    assert_eq!(get.param("query").as_deref(), Some("a + b"));
    assert_eq!(get.param("partial_response").as_deref(), Some("false"));
    assert_eq!(get.param("deny_partial_response").as_deref(), Some("1"));
}

#[tokio::test]
async fn concurrent_queries_share_one_client() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let stub = Stub::script(move |req, _| {
        h.fetch_add(1, Ordering::SeqCst);
        let q = req.param("query").unwrap();
        json(200, &vector_body(q.trim_start_matches("v")))
    });
    let client = Client::new();
    let c = cfg(stub.url.clone());
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let client = client.clone();
            let c = c.clone();
            tokio::spawn(async move {
                let r = client
                    .query(&c, &QueryRequest::instant(format!("v{i}"), None), None)
                    .await
                    .unwrap();
                (i, first_value(&r))
            })
        })
        .collect();
    for t in tasks {
        let (i, v) = t.await.unwrap();
        assert_eq!(v, f64::from(i));
    }
    assert_eq!(hits.load(Ordering::SeqCst), 20);
}

#[tokio::test]
async fn configuration_errors_do_not_touch_the_network() {
    let e = Client::new()
        .query(&PrometheusConfig::default(), &up(), None)
        .await
        .unwrap_err();
    assert!(matches!(e, PrometheusError::Config(_)), "{e:?}");
    let mut c = cfg("http://127.0.0.1:9".into());
    c.ca_file = Some("/nonexistent/ca.pem".into());
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
}
