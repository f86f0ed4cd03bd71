//! `rollgate lint`, serve's readiness that follows it, and exit codes scripts can trust: usage
//! errors exit 64 in every subcommand, never a verdict's 1 to 3.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::serve_common::{client, error_rate_template, path_str, template_dir, ServeProcess};
use crate::support::rollgate_bin;

fn rollgate(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(rollgate_bin());
    cmd.args(args).env_remove("ROLLGATE_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const HEAD: &str = "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\n";

/// One broken template per mistake the lint must catch, with a word its finding must hold.
fn broken() -> Vec<(&'static str, String, &'static str)> {
    let plugin = |name: &str, args: &str, metric: &str| {
        format!("{HEAD}metadata: {{name: {name}}}\nspec:\n  args: {args}\n  metrics:\n{metric}")
    };
    let metric = |cond: &str, body: &str| {
        format!(
            "    - name: m\n      successCondition: {cond}\n      provider:\n        plugin:\n          rollgate/analysis:\n{body}"
        )
    };
    let q = "            query: sum(rate(x{service=\"{{args.service}}\"}[5m]))\n";
    vec![
        (
            "nodata.yaml",
            plugin(
                "nodata",
                "[{name: service}]",
                &metric("result[0] < 0.01", &format!("{q}            noData: maybe\n")),
            ),
            "noData: expected one of fail, pass, inconclusive, error, got \"maybe\"",
        ),
        (
            "condition.yaml",
            plugin(
                "condition",
                "[{name: service}]",
                &metric(
                    "\"result[0] < 0.01 &&\"",
                    &format!("{q}            noData: fail\n"),
                ),
            ),
            "successCondition: expected an expression in Argo's condition language",
        ),
        (
            "typo.yaml",
            plugin(
                "typo",
                "[{name: service}]",
                &metric(
                    "result[0] < 0.01",
                    &format!("{q}            noData: fail\n            minRequests: {{query: 'sum(up)', cuont: 500}}\n"),
                ),
            ),
            "cuont: unknown key (did you mean \"count\"?)",
        ),
        (
            "undeclared.yaml",
            plugin(
                "undeclared",
                "[{name: svc}]",
                &metric("result[0] < 0.01", &format!("{q}            noData: fail\n")),
            ),
            "uses {{args.service}} but the template declares no argument \"service\" (declared: svc)",
        ),
        (
            "promql.yaml",
            plugin(
                "promql",
                "[{name: window}]",
                &metric(
                    "result[0] < 0.01",
                    "            query: sum(rate(x[{{args.window}}])\n            noData: fail\n",
                ),
            ),
            "expected a valid PromQL query",
        ),
        (
            "argo-prometheus.yaml",
            format!("{HEAD}metadata: {{name: argo}}\nspec:\n  metrics:\n    - name: m\n      successCondition: result[0] < 1\n      provider:\n        prometheus:\n          address: http://prom:9090\n          query: sum(rate(x[5m])\n"),
            "provider.prometheus.query: expected a valid PromQL query",
        ),
        (
            "count.yaml",
            plugin(
                "count",
                "[{name: service}, {name: n, value: lots}]",
                &format!(
                    "    - name: m\n      count: \"{{{{args.n}}}}\"\n      provider:\n        plugin:\n          rollgate/analysis:\n{q}            noData: fail\n"
                ),
            ),
            "count: expected a whole number",
        ),
    ]
}

#[test]
fn every_broken_template_is_caught_at_once_with_file_metric_and_key() {
    let files: Vec<(&str, String)> = broken().iter().map(|(f, t, _)| (*f, t.clone())).collect();
    let dir = template_dir(&files);
    let out = rollgate(&["lint", path_str(dir.path())], &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    for (file, _, expected) in broken() {
        let line = all
            .lines()
            .find(|l| l.contains(file) && l.contains(expected))
            .unwrap_or_else(|| panic!("{file}: no finding with {expected:?} in\n{all}"));
        assert!(line.contains(": error:"), "{line}");
        assert!(line.contains("metric \"m\""), "{line}");
    }
    assert!(all.contains("7 errors"), "{all}");

    let out = rollgate(&["lint", "-o", "json", path_str(dir.path())], &[]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["errors"], 7, "{doc}");
    let nodata = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("nodata.yaml"))
        .unwrap();
    assert_eq!(nodata["metric"], "m");
    assert_eq!(nodata["template"], "nodata");
    assert_eq!(nodata["line"], 13);
    assert!(nodata["path"].as_str().unwrap().ends_with(".noData"));

    let out = rollgate(&["lint", "-o", "github", path_str(dir.path())], &[]);
    let gh = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        gh.lines()
            .any(|l| l.starts_with("::error file=") && l.contains("nodata.yaml,line=13,")),
        "{gh}"
    );
}

#[test]
fn the_shipped_templates_lint_clean() {
    for path in ["examples", "manifests/serve/configmap.yaml"] {
        let out = rollgate(&["lint", path_str(&root().join(path))], &[]);
        assert_eq!(out.status.code(), Some(0), "{path}: {}", text(&out));
        assert!(text(&out).contains("0 errors"), "{}", text(&out));
    }
}

#[test]
fn a_rollout_or_canary_is_named_with_what_to_lint() {
    let dir = template_dir(&[
        (
            "rollout.yaml",
            "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: web}\nspec:\n  strategy:\n    canary:\n      steps:\n        - analysis:\n            templates: [{templateName: error-rate}]\n".into(),
        ),
        (
            "canary.yaml",
            "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: web}\nspec:\n  analysis:\n    webhooks:\n      - {name: gate, url: http://rollgate/flagger/v1/check, metadata: {template: error-rate}}\n".into(),
        ),
    ]);
    let out = rollgate(&["lint", path_str(&dir.path().join("rollout.yaml"))], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(
            "a Rollout \"web\": lint the AnalysisTemplates its analysis names (error-rate)"
        ),
        "{}",
        text(&out)
    );
    let out = rollgate(&["lint", path_str(&dir.path().join("canary.yaml"))], &[]);
    assert!(
        text(&out).contains("a Flagger Canary \"web\""),
        "{}",
        text(&out)
    );
    // dry-run says the same, and how to take a template out of serve's ConfigMap.
    let out = rollgate(
        &["dry-run", "-f", path_str(&dir.path().join("rollout.yaml"))],
        &[],
    );
    assert!(
        text(&out).contains("found a Rollout \"web\""),
        "{}",
        text(&out)
    );
    let cm = root().join("manifests/serve/configmap.yaml");
    let out = rollgate(&["dry-run", "-f", path_str(&cm)], &[]);
    assert!(
        text(&out).contains("a ConfigMap \"rollgate-templates\" holding templates")
            && text(&out).contains("yq"),
        "{}",
        text(&out)
    );
}

/// Arguments, environment, and a word the message must hold.
type UsageCase<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

/// Each of these exited 1 ("Failed" for dry-run) before; a script could not tell them from a
/// failed canary.
#[test]
fn usage_errors_exit_64_in_every_subcommand() {
    let dir = template_dir(&[("t.yaml", error_rate_template("t", "inconclusive"))]);
    let file = dir.path().join("t.yaml");
    let f = path_str(&file);
    let cases: Vec<UsageCase<'_>> = vec![
        (vec![], vec![], "Usage"),
        (vec!["dry-run", "-f", f, "--bogus"], vec![], "--bogus"),
        (
            vec!["dry-run", "-f", f, "--arg", "service"],
            vec![],
            "NAME=VALUE",
        ),
        (
            vec![
                "backtest",
                "-f",
                f,
                "--from",
                "yesterday",
                "--to",
                "2026-01-01T00:00:00Z",
            ],
            vec![],
            "RFC 3339",
        ),
        (
            vec![
                "backtest",
                "-f",
                f,
                "--from",
                "2026-01-02T00:00:00Z",
                "--to",
                "2026-01-01T00:00:00Z",
            ],
            vec![],
            "must be after",
        ),
        (
            vec![
                "backtest",
                "-f",
                f,
                "--from",
                "2999-01-01T00:00:00Z",
                "--to",
                "2999-01-02T00:00:00Z",
            ],
            vec![],
            "in the future",
        ),
        (
            vec!["dry-run", "-f", f, "--at", "2999-01-01T00:00:00Z"],
            vec![],
            "in the future",
        ),
        (vec!["serve", "--bogus"], vec![], "--bogus"),
        (vec!["rules", "--bogus"], vec![], "--bogus"),
        (vec!["lint"], vec![], "PATH"),
        (vec!["lint", "/nonexistent/rollgate"], vec![], "cannot read"),
        (
            vec!["--log-level", "loud", "lint", f],
            vec![],
            "error, warn, info, debug, trace",
        ),
        (
            vec!["lint", f],
            vec![("ROLLGATE_LOG", "loud")],
            "error, warn, info, debug, trace",
        ),
    ];
    for (args, env, expected) in cases {
        let out = rollgate(&args, &env);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
    }
    // Filters stay accepted.
    let out = rollgate(&["--log-level", "rollgate=debug,warn", "lint", f], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn serve_is_not_ready_while_a_template_fails_lint_and_strict_refuses_to_start() {
    let broken =
        error_rate_template("t", "inconclusive").replace("result[0] < 0.01", "result[0] < 0.01 &&");
    assert_ne!(broken, error_rate_template("t", "inconclusive"));
    let dir = template_dir(&[("t.yaml", broken)]);
    let server = ServeProcess::start(&["--templates", path_str(dir.path())]);
    let (status, body) = crate::support::runtime().block_on(async {
        let resp = client()
            .get(format!("{}/readyz", server.url))
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    });
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("1 lint error") && body.contains("successCondition"),
        "{body}"
    );
    assert!(
        server
            .wait_for_log(Duration::from_secs(5), |l| l["@level"] == "error"
                && l["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("successCondition")))
            .is_some(),
        "{:?}",
        server.logs()
    );
    drop(server);

    match ServeProcess::try_start(&["--templates", path_str(dir.path()), "--strict"], &[]) {
        Ok(_) => panic!("--strict started with a template that fails lint"),
        Err((status, logs)) => {
            assert_eq!(status.and_then(|s| s.code()), Some(1), "{logs:?}");
            assert!(
                logs.join("\n").contains("the templates fail lint"),
                "{logs:?}"
            );
        }
    }
}
