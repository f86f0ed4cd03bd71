//! The floor of a check's overhead: the least any HTTP service must do to answer a Flagger
//! check from the two queries (read the body, parse it as JSON, send both queries to
//! Prometheus at once, parse both answers, reply), built from the crates `rollgate serve`
//! uses (tokio's multi-thread runtime, axum, hyper, hyper-util's pooled client) with nothing
//! else. (Until rollgate's client left reqwest, the floor sent its queries with reqwest: that
//! floor's own share was 0.04–0.08 ms higher, docs/serve.md.) The bench runs it as
//! a process of its own beside serve, so both pay the same extra process hop; serve minus the
//! floor is what rollgate's own code adds, with the hop's scheduling cost taken out.
//!
//! Started by re-running the bench binary with `ROLLGATE_FLOOR_PROMETHEUS` (Prometheus's URL)
//! and `ROLLGATE_FLOOR_QUERIES` (a JSON object: service -> its two queries); prints
//! `listening <addr>` on stdout.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::Value;

/// Environment variable naming Prometheus: its presence makes the bench binary the floor.
pub const PROMETHEUS_ENV: &str = "ROLLGATE_FLOOR_PROMETHEUS";
/// Environment variable with the queries per service.
pub const QUERIES_ENV: &str = "ROLLGATE_FLOOR_QUERIES";

/// hyper-util's pooled client over plain TCP (no DNS beyond IP literals, no proxy, no TLS):
/// what rollgate's client sends a plain-HTTP query through.
pub type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<bytes::Bytes>,
>;

/// A pooled [`HttpClient`] with nodelay, as rollgate's transport sets it.
pub fn http_client() -> HttpClient {
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

/// Sends `query` to `url` (an instant-query endpoint) and reads the answer as a JSON tree.
pub async fn ask(client: &HttpClient, url: &hyper::Uri, query: &str) -> Value {
    let request = hyper::Request::post(url.clone())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("query={}", crate::support::prom::urlencode(query)).into())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

struct Floor {
    client: HttpClient,
    query_url: hyper::Uri,
    queries: HashMap<String, [String; 2]>,
}

/// Serves until killed.
pub fn run(prometheus: &str) {
    let queries: HashMap<String, [String; 2]> =
        serde_json::from_str(&std::env::var(QUERIES_ENV).unwrap()).unwrap();
    let floor = Arc::new(Floor {
        client: http_client(),
        query_url: format!("{prometheus}/api/v1/query").parse().unwrap(),
        queries,
    });
    let app = Router::new()
        .route("/flagger/v1/check", post(check))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(floor);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("listening {}", listener.local_addr().unwrap());
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = TowerToHyperService::new(app.clone());
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
}

async fn check(State(floor): State<Arc<Floor>>, body: axum::body::Bytes) -> (StatusCode, String) {
    let payload: Value = serde_json::from_slice(&body).unwrap();
    let service = payload["metadata"]["args.service"].as_str().unwrap();
    let [a, b] = &floor.queries[service];
    let (a, b) = futures::join!(
        ask(&floor.client, &floor.query_url, a),
        ask(&floor.client, &floor.query_url, b)
    );
    if a["status"] == "success" && b["status"] == "success" {
        (StatusCode::OK, "{\"ok\":true}".into())
    } else {
        (StatusCode::BAD_GATEWAY, "{\"ok\":false}".into())
    }
}
