//! `rollgate serve` as Argo Rollouts' `web` metric provider: the shipped AnalysisTemplate
//! (manifests/argo-rollouts/analysis-template-web.yaml) played the way Argo's web provider plays
//! it — args substituted into `jsonBody`, POSTed with its headers, `jsonPath` applied, the
//! template's conditions evaluated with Argo's semantics — against the real Prometheus.

use crate::serve_common;
use crate::support;

use std::path::Path;
use std::time::Duration;

use rollgate::condition::{evaluate_result, Condition, Value as CondValue};
use rollgate::measurement::Phase;
use rollgate::spec::{substitute, ArgValues};
use serde_json::{json, Value};
use serve_common::{
    client, compare_template, error_rate_template, path_str, post_for_json, serve_templates,
    template_dir, ServeProcess,
};
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

/// An Argo measurement as the web provider records it.
#[derive(Debug)]
struct ArgoMeasurement {
    phase: Phase,
    /// `measurement.value`: the JSON text of the value `jsonPath` picked.
    value: String,
    /// `measurement.message`: only set for an Error.
    message: String,
}

/// What Argo Rollouts v1.9.1's web provider makes of an answer
/// (`metricproviders/webmetric/webmetric.go`, `Run` and `parseResponse`): a status outside
/// 200-299 is an Error whose message is `received non 2xx response code: N` (the body is never
/// read); a body that is not JSON is Successful with the body as value; otherwise `jsonPath`
/// (`{$}` when empty, `NewWebMetricJsonParser`) picks the first result (`getValue`), its
/// `json.Marshal` text is the value, and `utils/evaluate/evaluate.go` `EvaluateResult` judges it
/// with the metric's conditions, here with rollgate's own Argo-compatible evaluator.
fn argo_measurement(metric: &Value, status: u16, body: &str) -> ArgoMeasurement {
    let error = |message: String| ArgoMeasurement {
        phase: Phase::Error,
        value: String::new(),
        message,
    };
    if !(200..300).contains(&status) {
        return error(format!("received non 2xx response code: {status}"));
    }
    let Ok(data) = serde_json::from_str::<Value>(body) else {
        return ArgoMeasurement {
            phase: Phase::Successful,
            value: body.to_string(),
            message: String::new(),
        };
    };
    let path = metric["provider"]["web"]["jsonPath"].as_str().unwrap_or("");
    let picked = match k8s_jsonpath(if path.is_empty() { "{$}" } else { path }, &data) {
        Ok(v) => v,
        Err(e) => return error(format!("Could not find JSONPath in body: {e}")),
    };
    let cond = |k: &str| metric[k].as_str().map(|c| Condition::compile(c).unwrap());
    let (success, failure) = (cond("successCondition"), cond("failureCondition"));
    match evaluate_result(&go_value(&picked), success.as_ref(), failure.as_ref()) {
        Ok(phase) => ArgoMeasurement {
            phase,
            value: go_json_marshal(&picked),
            message: String::new(),
        },
        Err(e) => error(format!("{e:?}")),
    }
}

/// The part of k8s.io/client-go's `util/jsonpath` (Argo v1.9.1 builds with client-go v0.34.1;
/// `FindResults`, `evalField`) that the shipped templates use: `{$}` is the whole document,
/// `{$.a.b}` (or `{.a.b}`) walks object keys, and a missing key is the error `a is not found`.
fn k8s_jsonpath(template: &str, data: &Value) -> Result<Value, String> {
    let inner = template
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or_else(|| panic!("jsonPath {template}: outside what this test follows"));
    let inner = inner.strip_prefix('$').unwrap_or(inner);
    let mut current = data;
    for name in inner.split('.').filter(|n| !n.is_empty()) {
        assert!(
            !name.contains(['[', ']', '*', '?', '@']),
            "jsonPath {template}: outside what this test follows"
        );
        current = current
            .get(name)
            .ok_or_else(|| format!("{name} is not found"))?;
    }
    Ok(current.clone())
}

/// The value Argo's conditions see: Go's `json.Unmarshal` into `any` makes every number a
/// float64.
fn go_value(v: &Value) -> CondValue {
    match v {
        Value::Number(n) => CondValue::Float(n.as_f64().unwrap()),
        Value::Array(a) => CondValue::Array(a.iter().map(go_value).collect()),
        Value::Object(o) => {
            CondValue::Map(o.iter().map(|(k, v)| (k.clone(), go_value(v))).collect())
        }
        other => CondValue::from(other),
    }
}

/// Go's `json.Marshal` of the value, as far as these answers need: keys sorted (serde_json's
/// map is sorted too) and `<`, `>`, `&` written as `\u003c`, `\u003e`, `\u0026`.
fn go_json_marshal(v: &Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn argo_phase(metric: &Value, status: u16, body: &str) -> Phase {
    argo_measurement(metric, status, body).phase
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
        // The template before the reason was kept: `{$.phase}` and conditions on `result`.
        let mut by_phase = metric.clone();
        by_phase["provider"]["web"]["jsonPath"] = json!("{$.phase}");
        by_phase["successCondition"] = json!("result == \"Successful\"");
        by_phase["failureCondition"] = json!("result == \"Failed\"");
        for (srv, service, rollgate_phase, argo, reason) in [
            (&server, "healthy", "Successful", Phase::Successful, "holds"),
            (&server, "bad", "Failed", Phase::Failed, "does not hold"),
            (
                &server,
                "lowtraffic",
                "Inconclusive",
                Phase::Inconclusive,
                "300 needed; onInsufficient: inconclusive",
            ),
            (&down, "healthy", "Error", Phase::Error, ""),
        ] {
            let (status, body) = play(
                &client,
                srv,
                &metric,
                &[("service", service), ("rollgate-token", "argo-token")],
            )
            .await;
            let measured = argo_measurement(&metric, status, &body);
            assert_eq!(measured.phase, argo, "{service}: {status} {body}");
            assert_eq!(argo_phase(&by_phase, status, &body), argo, "{service}");
            if argo == Phase::Error {
                // Argo never reads a non-2xx body: its measurement says only the status.
                assert_eq!(status, 503);
                assert_eq!(measured.message, "received non 2xx response code: 503");
            } else {
                // `{$}` keeps the whole answer, reason included, as the measurement's value.
                let kept: Value = serde_json::from_str(&measured.value).unwrap();
                assert_eq!(kept, serde_json::from_str::<Value>(&body).unwrap());
                assert!(measured.value.contains(reason), "{}", measured.value);
                let phase_only = argo_measurement(&by_phase, status, &body).value;
                assert_eq!(phase_only, format!("\"{rollgate_phase}\""));
            }
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

/// Argo's web provider sends no run id (argo-rollouts `metricproviders/webmetric/webmetric.go`,
/// `Run`: the request is built from `metric.provider.web` alone), so the engine's run tracker
/// keys a run by what the request holds. Before it, every call was "1 of 1": each compare check
/// spent the whole error budget.
#[test]
fn repeated_web_calls_of_one_run_get_increasing_check_positions() {
    // A declared argument the queries do not use tells two rollouts' runs apart.
    let mut declared: Value = serde_json::from_str(&compare_template()).unwrap();
    declared["spec"]["args"] = json!([{"name": "rollout", "value": "-"}]);
    let (_dir, server) = serve_templates(&[("compare.yaml", declared.to_string())]);
    let url = format!("{}/argo/v1/measure", server.url);
    let rt = runtime();
    // The `check` metadata of the answer to `body` (a single metric's measurement).
    let check = |body: &Value| -> String {
        let answer = rt.block_on(post_for_json(&url, body.to_string()));
        answer["metadata"]["check"]
            .as_str()
            .unwrap_or_else(|| panic!("no check: {answer}"))
            .to_string()
    };
    let run_a = json!({"template": "compare", "metric": "repeated", "args": {"rollout": "a"}});
    let run_b = json!({"template": "compare", "metric": "repeated", "args": {"rollout": "b"}});
    // An inline Argo metric object carries its own interval and count.
    let template: Value = serde_json::from_str(&compare_template()).unwrap();
    let inline = json!({"spec": template["spec"]["metrics"][0]});
    let once = json!({"template": "compare", "metric": "once"});
    let second = Duration::from_millis(1_000);
    assert_eq!(check(&run_a), "1 of 4");
    assert_eq!(check(&inline), "1 of 4");
    std::thread::sleep(second + Duration::from_millis(200));
    assert_eq!(check(&run_a), "2 of 4");
    assert_eq!(check(&inline), "2 of 4");
    // Other arguments are another run; a metric without interval is a single check.
    assert_eq!(check(&run_b), "1 of 4");
    assert_eq!(check(&once), "1 of 1");
    std::thread::sleep(second + Duration::from_millis(200));
    assert_eq!(check(&run_a), "3 of 4");
    assert_eq!(check(&run_b), "2 of 4");
    // No call for more than 3 intervals: the run is over, the next call starts a new one.
    std::thread::sleep(3 * second + Duration::from_millis(500));
    assert_eq!(check(&run_a), "1 of 4");
}
