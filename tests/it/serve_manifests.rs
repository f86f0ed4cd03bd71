//! The shipped `serve` and Flagger manifests parse and fit together: the Deployment's arguments
//! are ones `rollgate serve` accepts and point at the mounted ConfigMap and Secret, the probes
//! and Service hit real endpoints, every template in the ConfigMap loads, and every Flagger
//! webhook of the Canary selects a template that resolves with the arguments it sends.

use std::path::{Path, PathBuf};

use clap::Parser;
use rollgate::cli::{Cli, Command};
use rollgate::serve::analysis::{plan, Selection};
use rollgate::serve::flagger::{parse_payload, selection, HookType, HOOK_KEY, TOKEN_KEY};
use rollgate::serve::templates::{load_dir, TemplateSet};
use serde::Deserialize;
use serde_json::Value;

fn manifests(dir: &str) -> Vec<(PathBuf, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}", root.display());
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if !v.is_null() {
                assert!(
                    v["kind"].is_string(),
                    "{}: a document without kind",
                    f.display()
                );
                out.push((f.clone(), v));
            }
        }
    }
    out
}

fn find<'a>(docs: &'a [(PathBuf, Value)], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "exactly one {kind}");
    found[0]
}

/// Writes the ConfigMap's files to a directory and loads it as `serve --templates` would.
fn configmap_templates(cm: &Value) -> (tempfile::TempDir, TemplateSet) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in cm["data"].as_object().unwrap() {
        assert!(name.ends_with(".yaml"), "{name}");
        std::fs::write(dir.path().join(name), text.as_str().unwrap()).unwrap();
    }
    let set = load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, set)
}

#[test]
fn the_serve_deployment_service_and_configmap_fit_together() {
    let docs = manifests("serve");
    let deployment = find(&docs, "Deployment");
    let service = find(&docs, "Service");
    let monitor = find(&docs, "ServiceMonitor");
    let cm = find(&docs, "ConfigMap");

    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("rollgate").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("not serve: {args:?}")
    };

    // Mounts: the templates directory is the ConfigMap, the token file is in the Secret.
    let mounts = container["volumeMounts"].as_array().unwrap();
    let volumes = pod["spec"]["volumes"].as_array().unwrap();
    let mount_of = |path: &Path| {
        let m = mounts
            .iter()
            .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("nothing mounted at {}", path.display()));
        assert_eq!(m["readOnly"], true);
        volumes
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap()
            .clone()
    };
    let templates = serve.templates.expect("--templates");
    assert_eq!(
        mount_of(&templates)["configMap"]["name"],
        cm["metadata"]["name"]
    );
    let token = serve.auth_token_file.expect("--auth-token-file");
    assert!(mount_of(&token)["secret"]["secretName"].is_string());
    assert!(
        serve.deadline < std::time::Duration::from_secs(10),
        "under Flagger's 10 s"
    );

    // Hardening.
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"][0], "ALL");
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
    assert!(
        pod["spec"]["securityContext"]["runAsUser"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    assert!(
        pre_stop + serve.shutdown_grace.as_secs() <= grace,
        "preStop + --shutdown-grace must fit in terminationGracePeriodSeconds"
    );

    // Probes and ports.
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"], serve.listen.port());
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], port["name"]);
    }

    // Service → pods, ServiceMonitor → Service.
    let pod_labels = pod["metadata"]["labels"].as_object().unwrap();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(pod_labels.get(k), Some(v), "service selector {k}");
    }
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port["name"]);
    let svc_labels = service["metadata"]["labels"].as_object().unwrap();
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(svc_labels.get(k), Some(v), "monitor selector {k}");
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");

    // Every template in the ConfigMap loads.
    let (_dir, set) = configmap_templates(cm);
    let names: Vec<&str> = set.names().collect();
    assert_eq!(
        names,
        vec![
            "canary-vs-primary",
            "error-rate",
            "fleet-complete",
            "latency-p99"
        ]
    );
}

#[test]
fn every_flagger_webhook_selects_a_template_that_resolves() {
    let serve_docs = manifests("serve");
    let service = find(&serve_docs, "Service");
    let (_dir, set) = configmap_templates(find(&serve_docs, "ConfigMap"));
    let host = format!(
        "http://{}.{}.svc.cluster.local:{}",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap(),
        service["spec"]["ports"][0]["port"]
    );

    let docs = manifests("flagger");
    let canary = find(&docs, "Canary");
    assert_eq!(canary["apiVersion"], "flagger.app/v1beta1");
    let hooks = canary["spec"]["analysis"]["webhooks"].as_array().unwrap();
    let mut types: Vec<&str> = hooks.iter().map(|h| h["type"].as_str().unwrap()).collect();
    types.sort();
    assert_eq!(
        types,
        vec![
            "confirm-promotion",
            "confirm-promotion",
            "pre-rollout",
            "rollback",
            "rollout",
            "rollout"
        ]
    );
    let every = canary["spec"]["analysis"]["interval"].as_str().unwrap();
    let every = rollgate::spec::duration::parse_duration(every).unwrap();
    for hook in hooks {
        let name = hook["name"].as_str().unwrap();
        let url = hook["url"].as_str().unwrap();
        let want = if hook["type"] == "rollback" {
            "/flagger/v1/rollback"
        } else {
            "/flagger/v1/check"
        };
        assert_eq!(url, format!("{host}{want}"), "{name}");
        // Flagger's timeout, under which rollgate answers.
        assert_eq!(hook["timeout"], "10s", "{name}");
        // Flagger does not send the hook's type: the metadata repeats it, so the verdict is
        // answered in that hook's terms.
        let said = hook["metadata"][HOOK_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: hook"));
        let hook_type = HookType::parse(said).unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert_eq!(hook_type.name(), hook["type"], "{name}");
        // Exactly the payload Flagger would send for this canary.
        let payload = serde_json::json!({
            "name": canary["metadata"]["name"],
            "namespace": canary["metadata"]["namespace"],
            "phase": "Progressing",
            "checksum": "abc",
            "metadata": hook["metadata"],
        });
        let mut payload = parse_payload(payload.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert!(
            payload.metadata.remove(TOKEN_KEY).is_some(),
            "{name}: token"
        );
        let (sel, args) = selection(&payload).unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert!(matches!(sel, Selection::Template { .. }), "{name}");
        let planned = plan(&set, &sel, &args, &rollgate::engine::Trust::network(false))
            .unwrap_or_else(|e| panic!("{name}: {}", e.message));
        assert!(!planned.metrics.is_empty(), "{name}");
        // A metric that counts its checks must count at Flagger's pace (docs/serve.md).
        for metric in &planned.metrics {
            if let Some(interval) = metric.interval {
                assert_eq!(interval, every, "{name}: {}", metric.name);
            }
        }
    }
}
