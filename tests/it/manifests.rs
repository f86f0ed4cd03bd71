//! Every shipped manifest and example parses, and every AnalysisTemplate in them validates.

use std::path::{Path, PathBuf};

use clap::Parser;
use rollgate::cli::PluginArgs;
use rollgate::spec::Template;
use serde::Deserialize;
use serde_json::Value;

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// (file, argument, value) for arguments a placeholder cannot stand in for: the promoted cohort
/// must be one of the template's cohorts.
const EXAMPLE_ARGS: &[(&str, &str, &str)] =
    &[("analysis-template-fleet-cohorts.yaml", "cohort", "wave-1")];

#[test]
fn every_template_validates_with_placeholder_args() {
    let mut templates = 0;
    for path in yaml_files("manifests")
        .into_iter()
        .chain(yaml_files("examples"))
    {
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = documents(&path);
        assert!(!docs.is_empty(), "{}", path.display());
        if !docs.iter().any(|d| {
            d["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("AnalysisTemplate"))
        }) {
            continue;
        }
        for t in Template::parse_all(&text, &path.display().to_string()).unwrap() {
            // Arguments without a default get a placeholder value, as `--arg` would give them;
            // an argument the spec checks against a list gets a value from that list.
            let file = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let args: Vec<(String, String)> = t
                .args
                .iter()
                .filter(|(_, v)| v.is_none())
                .map(|(k, _)| {
                    let value = EXAMPLE_ARGS
                        .iter()
                        .find(|(f, name, _)| *f == file && name == k)
                        .map_or("x", |(_, _, v)| v);
                    (k.clone(), value.to_string())
                })
                .collect();
            let metrics = t
                .metrics(&args)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!metrics.is_empty());
            templates += 1;
        }
    }
    assert!(templates >= 3, "found {templates} templates");
}

#[test]
fn the_plugin_configmap_entry_is_what_the_controller_accepts() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests/argo-rollouts/argo-rollouts-config.yaml");
    let cm = &documents(&path)[0];
    let list: Vec<Value> =
        serde_yaml_ng::from_str(cm["data"]["metricProviderPlugins"].as_str().unwrap()).unwrap();
    assert_eq!(list.len(), 1);
    let entry = &list[0];
    let name = entry["name"].as_str().unwrap();
    let (ns, n) = name.split_once('/').unwrap();
    let ok = |s: &str, extra: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    assert!(
        ok(ns, "-") && ok(n, "_.-"),
        "{name} must match ^[a-zA-Z0-9-]+/[a-zA-Z0-9_.-]+$"
    );
    let sha = entry["sha256"].as_str().unwrap();
    assert!(
        sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()),
        "{sha}"
    );
    let location = entry["location"].as_str().unwrap();
    assert!(location.starts_with("https://") || location.starts_with("file://"));
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let parsed =
        PluginArgs::try_parse_from(std::iter::once("rollgate").chain(args.iter().copied()))
            .unwrap();
    assert_eq!(parsed.log_level, "info");
    assert!(parsed.prometheus.is_some());
}
