//! Proxies named by the environment, as reqwest reads them: rollgate builds its client without
//! reqwest's proxy matcher only when no proxy variable is set (`proxy_in_environment` in
//! src/prometheus/client.rs), so a proxy that is named must still carry every query, and
//! `NO_PROXY` must still exempt its hosts. Through the binary, since the variables are read
//! when the process builds its client.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::stub::{self, Stub};

/// Every variable reqwest's system proxy reads on Linux (hyper-util 0.1.21,
/// `client/proxy/matcher.rs`, `Builder::from_env`).
const PROXY_VARIABLES: [&str; 9] = [
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
];

/// A template whose one metric asks Prometheus at `address` directly (Argo's own provider).
fn template(dir: &Path, address: &str) -> std::path::PathBuf {
    let file = dir.join("t.yaml");
    let yaml = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: t}}
spec:
  metrics:
    - name: errors
      successCondition: result[0] < 0.01
      provider:
        prometheus:
          address: {address}
          query: sum(rate(errors[5m]))
"#
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

/// `rollgate dry-run` of `file` with only `env` of the proxy variables set.
fn dry_run(file: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rollgate"));
    cmd.args(["dry-run", "-o", "json", "-f"]).arg(file);
    for name in PROXY_VARIABLES {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

fn answered_successful(out: &Output) -> bool {
    let stdout = String::from_utf8_lossy(&out.stdout);
    out.status.success() && stdout.contains("\"Successful\"")
}

#[test]
fn queries_go_through_the_proxy_the_environment_names_and_no_proxy_exempts() {
    let healthy = |_: &stub::Request, _: usize| stub::json(200, &stub::vector_body("0.001"));
    let prometheus = Stub::script(healthy);
    let proxy = Stub::script(healthy);
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &prometheus.url);
    let query_url = format!("{}/api/v1/query", prometheus.url);

    // No variable: straight to Prometheus.
    let out = dry_run(&file, &[]);
    assert!(answered_successful(&out), "{out:?}");
    assert_eq!((prometheus.requests(), proxy.requests()), (1, 0));

    // Each name reqwest reads, either case: through the proxy, asked in absolute form.
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        let before = proxy.requests();
        let out = dry_run(&file, &[(name, &proxy.url)]);
        assert!(answered_successful(&out), "{name}: {out:?}");
        assert_eq!(proxy.requests(), before + 1, "{name}");
        assert_eq!(proxy.last_request().unwrap().target, query_url, "{name}");
    }
    assert_eq!(prometheus.requests(), 1, "nothing went around the proxy");

    // A proxy for https only does not take an http query; NO_PROXY exempts its host.
    let before = proxy.requests();
    for env in [
        &[("HTTPS_PROXY", proxy.url.as_str())][..],
        &[
            ("HTTP_PROXY", proxy.url.as_str()),
            ("NO_PROXY", "127.0.0.1"),
        ][..],
    ] {
        let out = dry_run(&file, env);
        assert!(answered_successful(&out), "{env:?}: {out:?}");
    }
    assert_eq!((prometheus.requests(), proxy.requests()), (3, before));
}
