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

/// Checks one `metricProviderPlugins` entry as the controller would load it; returns its location.
fn check_plugin_entry(entry: &Value, what: &str) -> String {
    let name = entry["name"].as_str().unwrap();
    let (ns, n) = name.split_once('/').unwrap();
    let ok = |s: &str, extra: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    assert!(
        ok(ns, "-") && ok(n, "_.-"),
        "{what}: {name} must match ^[a-zA-Z0-9-]+/[a-zA-Z0-9_.-]+$"
    );
    let location = entry["location"].as_str().unwrap();
    match entry.get("sha256") {
        // The controller checks it for http(s) locations only, and then it must be the real one:
        // a placeholder would stop the controller at start-up.
        Some(sha) => {
            let sha = sha.as_str().unwrap();
            assert!(
                location.starts_with("https://"),
                "{what}: sha256 beside {location}"
            );
            assert!(
                sha.len() == 64
                    && sha.chars().all(|c| c.is_ascii_hexdigit())
                    && sha.chars().any(|c| c != '0'),
                "{what}: {sha}"
            );
        }
        // A file the controller copies: never the path it copies to, plugin-bin/<ns>/<name>.
        None => {
            let path = location.strip_prefix("file://").unwrap_or_else(|| {
                panic!("{what}: {location}: an https location needs its sha256")
            });
            assert!(
                !path.ends_with(&format!("/plugin-bin/{name}")),
                "{what}: {path} is where the controller installs the plugin"
            );
        }
    }
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
    location.to_string()
}

fn manifest(path: &str) -> Vec<Value> {
    documents(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
}

/// The image tag `scripts/release` gives the image of this version.
fn release_image() -> String {
    format!("ghcr.io/rollgate/rollgate:v{}", env!("CARGO_PKG_VERSION"))
}

#[test]
fn the_plugin_configmap_entry_is_what_the_controller_accepts() {
    let cm = &manifest("manifests/argo-rollouts/argo-rollouts-config.yaml")[0];
    let list: Vec<Value> =
        serde_yaml_ng::from_str(cm["data"]["metricProviderPlugins"].as_str().unwrap()).unwrap();
    assert_eq!(list.len(), 1);
    check_plugin_entry(&list[0], "argo-rollouts-config.yaml");
}

#[test]
fn the_helm_values_copy_the_plugin_where_the_configmap_loads_it_from() {
    let values = &manifest("manifests/argo-rollouts/helm-values.yaml")[0]["controller"];
    let plugins = values["metricProviderPlugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1);
    let location = check_plugin_entry(&plugins[0], "helm-values.yaml");
    // The chart renders the list into the same ConfigMap key.
    let cm = &manifest("manifests/argo-rollouts/argo-rollouts-config.yaml")[0];
    let list: Vec<Value> =
        serde_yaml_ng::from_str(cm["data"]["metricProviderPlugins"].as_str().unwrap()).unwrap();
    assert_eq!(
        list[0], plugins[0],
        "helm-values.yaml and argo-rollouts-config.yaml differ"
    );

    let inits = values["initContainers"].as_array().unwrap();
    assert_eq!(inits.len(), 1);
    let init = &inits[0];
    assert_eq!(init["image"], release_image().as_str());
    let command: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    // The image has the binary at /rollgate and a `cp` (Containerfile), nothing else.
    assert_eq!(command[..2], ["/bin/cp", "/rollgate"], "{command:?}");
    assert_eq!(command.len(), 3, "{command:?}");
    assert_eq!(
        Some(command[2]),
        location.strip_prefix("file://"),
        "the init container copies to another file than the controller loads"
    );
    // Into the chart's plugin-bin volume, mounted where the controller has it.
    let mount = &init["volumeMounts"].as_array().unwrap()[0];
    assert_eq!(mount["name"], "plugin-bin");
    assert_eq!(mount["mountPath"], "/home/argo-rollouts/plugin-bin");
    assert!(command[2].starts_with("/home/argo-rollouts/plugin-bin/"));
}

#[test]
fn the_manifests_name_the_image_the_release_builds() {
    // scripts/release tags its image with the package version; a manifest naming another tag
    // would pull an image no release made.
    let mut images = Vec::new();
    for path in yaml_files("manifests") {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            if let Some(image) = line.trim().strip_prefix("image:") {
                let image = image.trim().trim_matches('"');
                // The example Rollout's application image is not rollgate's.
                if image.contains("rollgate") {
                    images.push((path.clone(), image.to_string()));
                }
            }
        }
    }
    assert!(images.len() >= 2, "{images:?}");
    for (path, image) in images {
        assert_eq!(image, release_image(), "{}", path.display());
    }
    let containerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile"))
            .unwrap();
    assert!(containerfile.contains("USER 999:999"), "{containerfile}");
    assert!(
        containerfile.contains(r#"ENTRYPOINT ["/rollgate"]"#),
        "{containerfile}"
    );
}

#[test]
fn no_manifest_names_a_placeholder_digest() {
    // A sha256 of zeros (or mostly zeros) is a placeholder someone forgot: the controller
    // refuses to start on it, and a digest argument would never match.
    let mut digests = 0;
    for path in yaml_files("manifests") {
        let text = std::fs::read_to_string(&path).unwrap();
        for token in text.split(|c: char| !c.is_ascii_hexdigit()) {
            if token.len() == 64 {
                digests += 1;
                assert!(
                    !token.contains("00000000"),
                    "{}: {token} looks like a placeholder",
                    path.display()
                );
            }
        }
    }
    assert!(digests >= 1, "no digest found: the scan reads nothing");
}
