//! `rollgate dashboard`: the JSON of every shipped template type-checks against Grafana's own
//! dashboard schema (the `Dashboard` type of the npm package `@grafana/schema` 13.2.3, which
//! Grafana generates from its CUE kinds, checked by the TypeScript compiler with excess-property
//! checks), carries that package's current `schemaVersion`, and its panels' queries return data
//! from the real Prometheus harness.
//!
//! The two npm packages (`@grafana/schema@13.2.3`, `typescript@5.9.3`) are installed by this
//! test into `target/grafana-schema` on first use (`npm install`, the npm registry).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;
use support::prom::shared;
use support::scenarios::NODE_AGENT_NEW;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dashboard(file: &Path, args: &[&str]) -> Output {
    Command::new(crate::support::rollgate_bin())
        .arg("dashboard")
        .arg("-f")
        .arg(file)
        .args(args)
        .output()
        .expect("run rollgate")
}

fn json_of(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("dashboard JSON")
}

/// The directory holding `node_modules` with Grafana's schema package and TypeScript.
fn schema_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = root().join("target/grafana-schema");
        let ready = dir
            .join("node_modules/@grafana/schema/package.json")
            .exists()
            && dir.join("node_modules/typescript/bin/tsc").exists();
        if !ready {
            std::fs::create_dir_all(&dir).unwrap();
            let out = Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    dir.to_str().unwrap(),
                    "@grafana/schema@13.2.3",
                    "typescript@5.9.3",
                ])
                .output()
                .expect("npm (Debian's npm package)");
            assert!(
                out.status.success(),
                "npm install: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    })
}

/// Type-checks `dashboard` as a `Dashboard` of `@grafana/schema`; the compiler's complaints.
/// String enums (`ThresholdsMode` and others) are compared by their values, as JSON spells
/// them; everything else is Grafana's type as generated.
fn type_errors(dashboard: &Value, dir: &Path) -> Option<String> {
    // Inside `dir`, so the compiler finds node_modules from the file's directory upwards.
    let work = tempfile::tempdir_in(dir).unwrap();
    let source = format!(
        r#"import type {{ Dashboard }} from "@grafana/schema";
type Json<T> = T extends string ? `${{T}}` : T extends number | boolean | null | undefined ? T
  : T extends Array<infer U> ? Array<Json<U>> : T extends object ? {{ [K in keyof T]: Json<T[K]> }} : T;
export const dashboard: Json<Dashboard> = {};
"#,
        serde_json::to_string_pretty(dashboard).unwrap()
    );
    std::fs::write(work.path().join("check.ts"), source).unwrap();
    let out = Command::new("node")
        .arg(dir.join("node_modules/typescript/bin/tsc"))
        .args([
            "--noEmit",
            "--strict",
            "--skipLibCheck",
            "--moduleResolution",
            "node",
            "check.ts",
        ])
        .current_dir(work.path())
        .output()
        .expect("node (Debian's nodejs package)");
    (!out.status.success()).then(|| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `schemaVersion` of Grafana's `defaultDashboard` in the installed package.
fn current_schema_version(dir: &Path) -> u64 {
    let out = Command::new("node")
        .args([
            "-e",
            "process.stdout.write(String(require('@grafana/schema').defaultDashboard.schemaVersion))",
        ])
        .env("NODE_PATH", dir.join("node_modules"))
        .output()
        .expect("node");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)))
}

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_dashboard_matches_grafanas_schema() {
    let dir = schema_dir();
    let version = current_schema_version(dir);
    assert!(version >= 41, "{version}");
    let mut types = std::collections::BTreeSet::new();
    for file in examples() {
        let d = json_of(&dashboard(&file, &[]));
        assert_eq!(d["schemaVersion"], version, "{}", file.display());
        let vars = d["templating"]["list"].as_array().unwrap();
        assert!(
            vars.iter()
                .any(|v| v["name"] == "datasource" && v["type"] == "datasource"),
            "{}",
            file.display()
        );
        let panels = d["panels"].as_array().unwrap();
        let rows = panels.iter().filter(|p| p["type"] == "row").count();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            rows,
            text.matches("rollgate/analysis:").count(),
            "one row per rollgate metric: {}",
            file.display()
        );
        for p in panels.iter().filter(|p| p["type"] != "row") {
            types.insert(p["type"].as_str().unwrap().to_string());
            assert_eq!(p["datasource"]["uid"], "${datasource}");
            for t in p["targets"].as_array().unwrap() {
                rollgate::spec::check_promql("expr", t["expr"].as_str().unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            }
        }
        if let Some(errors) = type_errors(&d, dir) {
            panic!("{}: not a Grafana dashboard:\n{errors}", file.display());
        }
    }
    assert!(
        types.contains("timeseries") && types.contains("table"),
        "{types:?}"
    );
}

/// The check can fail: a panel with a misspelt key, and a gridPos width as a string, are
/// rejected by the same compiler run.
#[test]
fn the_schema_check_rejects_a_broken_dashboard() {
    let dir = schema_dir();
    let d = json_of(&dashboard(&root().join("examples/error-rate.yaml"), &[]));
    let mut misspelt = d.clone();
    misspelt["panels"][1]["fieldConfg"] = serde_json::json!({});
    let errors = type_errors(&misspelt, dir).expect("a misspelt key is an error");
    assert!(errors.contains("fieldConfg"), "{errors}");
    let mut width = d.clone();
    width["panels"][1]["gridPos"]["w"] = serde_json::json!("12");
    assert!(type_errors(&width, dir).is_some());
    let mut mode = d;
    mode["panels"][1]["fieldConfig"]["defaults"]["thresholds"]["mode"] =
        serde_json::json!("absolut");
    assert!(type_errors(&mode, dir).is_some());
}

/// The panels' queries, run as Grafana runs them (range queries over the last hour), return
/// data from the harness: the query metric's value and guard, and the fleet tables.
#[test]
fn the_panels_return_data_from_prometheus() {
    let server = shared();
    let (start, end) = ((server.base - 3600) as f64, server.base as f64);
    let d = json_of(&dashboard(
        &root().join("examples/error-rate.yaml"),
        &["--arg", "service=healthy"],
    ));
    let panels = d["panels"].as_array().unwrap();
    let value = panels
        .iter()
        .find(|p| p["title"] == "error-ratio: value")
        .unwrap();
    let expr = value["targets"][0]["expr"].as_str().unwrap();
    let series = server.query_range(expr, start, end, 60.0);
    assert_eq!(series.len(), 1, "{expr}");
    assert_eq!(series[0].points.len(), 61);
    assert!(
        (series[0].points[60].1 - 0.001).abs() < 1e-9,
        "{:?}",
        series[0].points[60]
    );
    // The threshold drawn is the condition's.
    assert_eq!(
        value["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"],
        0.01
    );
    let guard = panels
        .iter()
        .find(|p| p["title"] == "error-ratio: requests vs minRequests.count")
        .unwrap();
    let expr = guard["targets"][0]["expr"].as_str().unwrap();
    assert_eq!(server.query_one(expr, end), 30000.0);

    let digest = NODE_AGENT_NEW.digest;
    let d = json_of(&dashboard(
        &root().join("examples/fleet-gate.yaml"),
        &["--arg", &format!("digest=sha256:{digest}")],
    ));
    let panels = d["panels"].as_array().unwrap();
    let find = |suffix: &str| {
        panels
            .iter()
            .find(|p| p["title"].as_str().is_some_and(|t| t.ends_with(suffix)))
            .unwrap_or_else(|| panic!("{suffix}"))
    };
    let matrix = find(": version matrix");
    let versions = server.query(matrix["targets"][0]["expr"].as_str().unwrap(), end);
    assert!(versions.len() >= 2, "{versions:?}");
    let stragglers = server.query(
        find(": stragglers")["targets"][0]["expr"].as_str().unwrap(),
        end,
    );
    assert!(!stragglers.is_empty());
    let silent = server.query(
        find(": silent targets")["targets"][0]["expr"]
            .as_str()
            .unwrap(),
        end,
    );
    let names: Vec<&str> = silent
        .iter()
        .map(|s| s.labels["cluster"].as_str())
        .collect();
    assert!(
        names.contains(&"edge-058") && names.contains(&"edge-311"),
        "{names:?}"
    );
}
