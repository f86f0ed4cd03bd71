//! `rollgate serve` as Argo Rollouts' `web` metric provider: the shipped AnalysisTemplate
//! (manifests/argo-rollouts/analysis-template-web.yaml) played the way Argo's web provider plays
//! it — args substituted into `jsonBody`, POSTed with its headers, `jsonPath` applied, the
//! template's conditions evaluated with Argo's semantics — against the real Prometheus.

mod serve_common;
mod support;

use std::path::Path;
use std::time::Duration;

use rollgate::condition::{evaluate_result, Condition, Value as CondValue};
use rollgate::measurement::Phase;
use rollgate::spec::{substitute, ArgValues};
use serde_json::{json, Value};
use serve_common::{client, error_rate_template, path_str, template_dir, ServeProcess};
use support::stub::closed_port;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The shipped web-provider template's only metric.
fn shipped_metric() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests/argo-rollouts/analysis-template-web.yaml");
    let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["spec"]["metrics"][0].clone()
}

/// What Argo's web provider makes of an answer: non-2xx is Error; otherwise `jsonPath` picks
/// the value and the metric's conditions judge it.
fn argo_phase(metric: &Value, status: u16, body: &str) -> Phase {
    if !(200..300).contains(&status) {
        return Phase::Error;
    }
    assert_eq!(metric["provider"]["web"]["jsonPath"], "{$.phase}");
    let v: Value = serde_json::from_str(body).unwrap();
    let result = CondValue::String(v["phase"].as_str().unwrap().to_string());
    let cond = |k: &str| Condition::compile(metric[k].as_str().unwrap()).unwrap();
    evaluate_result(
        &result,
        Some(&cond("successCondition")),
        Some(&cond("failureCondition")),
    )
    .unwrap()
}

/// Sends the shipped metric's request as Argo would, with `args` substituted.
async fn play(
    client: &reqwest::Client,
    server: &ServeProcess,
    metric: &Value,
    args: &[(&str, &str)],
) -> (u16, String) {
    let values: ArgValues = args
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect();
    let web = substitute(&metric["provider"]["web"], &values, "web").unwrap();
    assert_eq!(web["method"], "POST");
    let timeout = Duration::from_secs(web["timeoutSeconds"].as_u64().unwrap());
    let mut req = client
        .post(format!("{}/argo/v1/measure", server.url))
        .timeout(timeout)
        .header("Content-Type", "application/json")
        .body(web["jsonBody"].to_string());
    for h in web["headers"].as_array().unwrap() {
        req = req.header(h["key"].as_str().unwrap(), h["value"].as_str().unwrap());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

#[test]
fn the_shipped_web_template_gets_rollgates_verdicts_through_argos_conditions() {
    let prom = support::prom::shared();
    let token_dir = tempfile::tempdir().unwrap();
    let token = token_dir.path().join("token");
    std::fs::write(&token, "argo-token").unwrap();
    let server = ServeProcess::start(&[
        "--prometheus",
        &prom.url,
        "--auth-token-file",
        path_str(&token),
    ]);
    let down = ServeProcess::start(&[
        "--prometheus",
        &closed_port(),
        "--auth-token-file",
        path_str(&token),
    ]);
    let metric = shipped_metric();
    let client = client();
    runtime().block_on(async {
        for (srv, service, rollgate_phase, argo) in [
            (&server, "healthy", "Successful", Phase::Successful),
            (&server, "bad", "Failed", Phase::Failed),
            (&server, "lowtraffic", "Inconclusive", Phase::Inconclusive),
            (&down, "healthy", "Error", Phase::Error),
        ] {
            let (status, body) = play(
                &client,
                srv,
                &metric,
                &[("service", service), ("rollgate-token", "argo-token")],
            )
            .await;
            assert_eq!(
                argo_phase(&metric, status, &body),
                argo,
                "{service}: {status} {body}"
            );
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["phase"], rollgate_phase, "{body}");
            assert_eq!(v["metric"], "error-ratio");
            assert_eq!(v["kind"], "query");
            assert!(!v["message"].as_str().unwrap().is_empty());
            assert!(
                v["startedAt"].is_string() && v["finishedAt"].is_string(),
                "{body}"
            );
            assert_eq!(v["metadata"]["metric"], "error-ratio");
            if rollgate_phase == "Failed" {
                let value: Vec<f64> = serde_json::from_str(v["value"].as_str().unwrap()).unwrap();
                assert!((value[0] - 0.05).abs() < 0.005, "{body}");
                assert!(v["metadata"]["query"]
                    .as_str()
                    .unwrap()
                    .contains("service=\"bad\""));
            }
        }
        // Without the token Argo would get a 401: an Error measurement, never a pass.
        let (status, body) = play(
            &client,
            &server,
            &metric,
            &[("service", "healthy"), ("rollgate-token", "nope")],
        )
        .await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(argo_phase(&metric, status, &body), Phase::Error);
    });
}

#[test]
fn templates_and_argo_metric_objects_are_accepted_and_bad_requests_named() {
    let prom = support::prom::shared();
    let dir = template_dir(&[("t.yaml", error_rate_template("error-rate", "inconclusive"))]);
    let server = ServeProcess::start(&[
        "--prometheus",
        &prom.url,
        "--templates",
        path_str(dir.path()),
    ]);
    let url = format!("{}/argo/v1/measure", server.url);
    let client = client();
    let ratio = support::scenarios::BAD.ratio_query("5m");
    runtime().block_on(async {
        let send = |body: Value| {
            let client = client.clone();
            let url = url.clone();
            async move {
                let resp = client
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap();
                (status, serde_json::from_str::<Value>(&text).unwrap())
            }
        };
        let (status, v) =
            send(json!({"template": "error-rate", "args": {"service": "healthy"}})).await;
        assert_eq!(
            (status, v["phase"].as_str()),
            (200, Some("Successful")),
            "{v}"
        );
        let (status, v) = send(
            json!({"template": "error-rate", "metric": "error-ratio", "args": {"service": "bad"}}),
        )
        .await;
        assert_eq!((status, v["phase"].as_str()), (200, Some("Failed")), "{v}");

        // Argo's own metric object, judged with the built-in prometheus provider's semantics.
        let argo_metric = json!({
            "name": "builtin",
            "successCondition": "result[0] < 0.01",
            "provider": {"prometheus": {"address": prom.url, "query": ratio}}
        });
        let (status, v) = send(json!({"spec": argo_metric})).await;
        assert_eq!((status, v["phase"].as_str()), (200, Some("Failed")), "{v}");
        assert_eq!(v["kind"], "prometheus");
        assert_eq!(v["metric"], "builtin");

        // A rollgate spec with its conditions, named.
        let (status, v) = send(json!({
            "name": "ratio",
            "spec": {"query": ratio, "noData": "fail", "failureCondition": "result[0] > 0.01"}
        }))
        .await;
        assert_eq!(
            (status, v["phase"].as_str(), v["metric"].as_str()),
            (200, Some("Failed"), Some("ratio")),
            "{v}"
        );

        for (body, want, needle) in [
            (
                json!({"spec": "query: up"}),
                400,
                "spec: expected a metric spec object",
            ),
            (
                json!({"spec": {"query": "up"}}),
                422,
                "spec.noData: is required",
            ),
            (
                json!({"spec": {"query": "up", "noData": "fail"}, "extra": 1}),
                400,
                "extra: unknown key",
            ),
            (
                json!({"template": "nope"}),
                422,
                "unknown template \"nope\"",
            ),
            (
                json!({"spec": {"query": "up", "noData": "fail"}, "args": {"a": {"b": 1}}}),
                400,
                "args.a",
            ),
            (
                json!({"spec": {"provider": {"web": {"url": "http://x"}}}}),
                422,
                "cannot evaluate",
            ),
            // 20,000 strings naming a 50 kB argument: 1 GB once expanded.
            (
                json!({
                    "spec": {"query": "up", "noData": "fail", "x": vec!["{{args.a}}"; 20_000]},
                    "args": {"a": "x".repeat(50_000)}
                }),
                422,
                "expand to at most 1048576 bytes",
            ),
        ] {
            let (status, v) = send(body.clone()).await;
            let shown = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            assert_eq!(status, want, "{}: {}", shown(&body), shown(&v));
            assert!(
                v["error"].as_str().unwrap().contains(needle),
                "{}: {}",
                shown(&body),
                shown(&v)
            );
        }
        // Plain text for a person who asks for it.
        let resp = client
            .post(&url)
            .header("Accept", "text/plain")
            .body(json!({"template": "error-rate", "args": {"service": "bad"}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        assert!(resp
            .text()
            .await
            .unwrap()
            .starts_with("Failed: error-ratio: "));
    });
}
