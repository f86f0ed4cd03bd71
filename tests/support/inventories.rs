//! Generated inventories in the exact shapes the real exporters write, for the fleet gate:
//! kube-state-metrics pods as runtimes really report them (terminal pods, injected init
//! containers, native sidecars, every `image_id` form, a KSM older than v2.3), Argo CD's
//! `argocd_app_info` and Flux's `gotk_resource_info`.
//!
//! Shapes, from the upstream source:
//! - kube-state-metrics v2.x `internal/store/pod.go` (kubernetes/kube-state-metrics@c92fe0c):
//!   `kube_pod_container_info{namespace,pod,uid,container,image_spec,image,image_id,container_id}`
//!   (`image_spec` added in v2.3.0; v2.2.0 has `container,image,image_id,container_id`),
//!   `kube_pod_init_container_info{...,restart_policy}` (`restart_policy` from v2.11.0, empty
//!   unless the init container sets one), `kube_pod_status_phase{namespace,pod,uid,phase}`: one
//!   series per phase (Pending, Succeeded, Failed, Unknown, Running), 1 for the current one.
//! - Argo CD `controller/metrics/metrics.go` (argoproj/argo-cd@00b91ec, v2):
//!   `argocd_app_info{namespace,name,project,autosync_enabled,repo,dest_server,dest_namespace,
//!   sync_status,health_status,operation}` = 1.
//! - Flux's kube-state-metrics custom-resource-state config
//!   (fluxcd/flux2-monitoring-example `monitoring/controllers/kube-prometheus-stack/
//!   kube-state-metrics-config.yaml`): `gotk_resource_info` (type Info) with `name`,
//!   `exported_namespace`, `ready` (the Ready condition's status), `suspended`, `revision`
//!   (`status.lastAppliedRevision` for a Kustomization), `source_name`, plus the
//!   `customresource_group/kind/version` labels kube-state-metrics adds.
//!
//! Every series is sampled every minute from base-1h to base+1h unless said.

use super::scenarios::{push_sample, times, Dataset, Image, NODE_AGENT_NEW, NODE_AGENT_OLD};

/// Namespace of the kube-state-metrics reality fleet.
pub const KSM_NAMESPACE: &str = "edge-agents";
/// Namespace of the fleet exported by a kube-state-metrics older than v2.3 (no `image_spec`).
pub const LEGACY_NAMESPACE: &str = "edge-legacy";
/// Sample step, seconds.
const STEP: i64 = 60;
const FROM: i64 = -3600;
const TO: i64 = 3600;

const ISTIO_PROXY: &str = "docker.io/istio/proxyv2:1.22.1";
const ISTIO_ID: &str =
    "docker.io/istio/proxyv2@sha256:8fbc0a0b5e7a1c9e2b5d4c3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b";

/// How a runtime writes `image_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdForm {
    /// containerd / CRI-O: `repo@sha256:<digest>`.
    RepoDigest,
    /// dockershim / cri-dockerd: `docker-pullable://repo@sha256:<digest>`.
    DockerPullable,
    /// A bare image id `sha256:<digest>` (images loaded locally, some CRI-O setups).
    Bare,
}

/// One pod of the node-agent DaemonSet.
#[derive(Clone, Copy, Debug)]
struct Pod {
    old: bool,
    /// Current phase; `None`: no `kube_pod_status_phase` series at all.
    phase: Option<&'static str>,
    id_form: IdForm,
}

const RUNNING: Pod = Pod {
    old: false,
    phase: Some("Running"),
    id_form: IdForm::RepoDigest,
};

/// The kube-state-metrics reality fleet: clusters `site-00`..`site-09`, namespace
/// `edge-agents`, two node-agent pods each (main containers `node-agent` and `istio-proxy`;
/// init containers `istio-init` and `node-agent-init`, plus the native sidecar `istio-proxy`
/// with `restart_policy="Always"` as Istio's native-sidecar mode injects it). Expected version:
/// node-agent 1.5.0 (`NODE_AGENT_NEW`). Per cluster:
///
/// | cluster | what | straggler? |
/// |---|---|---|
/// | site-00, site-09 | normal, `repo@sha256:` ids | no |
/// | site-01 | `docker-pullable://repo@sha256:<new>` ids | no |
/// | site-02 | bare `sha256:<new>` ids | no |
/// | site-03 | + an evicted pod (phase Failed) on the old image | only with `ignoreTerminalPods: false` |
/// | site-04 | + a pod on the old image with no phase series | yes (missing phase data removes nothing) |
/// | site-05 | + a Pending pod on the old image | yes |
/// | site-06 | pod 0's `node-agent-init` on the old image | when that init container counts |
/// | site-07 | pod 0 has a native sidecar `node-agent-cache` (`restart_policy="Always"`) on the old image | when it counts and sidecars do |
/// | site-08 | bare `sha256:<old>` id on pod 0 | yes |
///
/// Every `istio-init` / `istio-proxy` runs Istio's image, so counting every init container
/// makes all ten clusters stragglers.
pub fn ksm_clusters() -> Vec<String> {
    (0..10).map(|i| format!("site-{i:02}")).collect()
}

fn ksm_pods(cluster: usize) -> Vec<Pod> {
    let mut pods = vec![RUNNING, RUNNING];
    let form = match cluster {
        1 => IdForm::DockerPullable,
        2 => IdForm::Bare,
        _ => IdForm::RepoDigest,
    };
    for p in &mut pods {
        p.id_form = form;
    }
    let old = |phase| Pod {
        old: true,
        phase,
        id_form: IdForm::RepoDigest,
    };
    match cluster {
        3 => pods.push(old(Some("Failed"))),
        4 => pods.push(old(None)),
        5 => pods.push(old(Some("Pending"))),
        8 => {
            pods[0].old = true;
            pods[0].id_form = IdForm::Bare;
        }
        _ => {}
    }
    pods
}

fn image_id(old: bool, form: IdForm) -> String {
    let image = if old { NODE_AGENT_OLD } else { NODE_AGENT_NEW };
    match form {
        IdForm::RepoDigest => image.image_id(),
        IdForm::DockerPullable => format!("docker-pullable://{}", image.image_id()),
        IdForm::Bare => format!("sha256:{}", image.digest),
    }
}

/// Writes the reality fleet and the legacy fleet (three clusters `legacy-0`..`legacy-2`, two
/// current pods each, `kube_pod_container_info` without `image_spec` as kube-state-metrics
/// v2.2 writes it).
pub fn write_ksm(ds: &mut Dataset, base: i64) {
    let ts: Vec<i64> = times(base, FROM, TO, STEP).collect();
    let ns = KSM_NAMESPACE;
    for (c, cluster) in ksm_clusters().iter().enumerate() {
        for (p, pod) in ksm_pods(c).iter().enumerate() {
            let name = format!("node-agent-{c:02}{p}");
            let uid = format!("6f1c2d3e-0000-4000-8000-{c:06}{p:06}");
            let image = if pod.old {
                NODE_AGENT_OLD
            } else {
                NODE_AGENT_NEW
            };
            let id = image_id(pod.old, pod.id_form);
            let pod_labels = [
                ("cluster", cluster.as_str()),
                ("namespace", ns),
                ("pod", name.as_str()),
                ("uid", uid.as_str()),
            ];
            let spec = image.image();
            let cid = format!("containerd://{c:02}{p}a");
            let mut containers = vec![
                (
                    "kube_pod_container_info",
                    "node-agent",
                    spec.clone(),
                    spec.clone(),
                    id.clone(),
                    None,
                ),
                (
                    "kube_pod_container_info",
                    "istio-proxy",
                    ISTIO_PROXY.to_string(),
                    ISTIO_PROXY.to_string(),
                    ISTIO_ID.to_string(),
                    None,
                ),
                (
                    "kube_pod_init_container_info",
                    "istio-init",
                    ISTIO_PROXY.to_string(),
                    ISTIO_PROXY.to_string(),
                    ISTIO_ID.to_string(),
                    Some(""),
                ),
                (
                    "kube_pod_init_container_info",
                    "istio-proxy",
                    ISTIO_PROXY.to_string(),
                    ISTIO_PROXY.to_string(),
                    ISTIO_ID.to_string(),
                    Some("Always"),
                ),
            ];
            let init_old = pod.old || (c == 6 && p == 0);
            let init_image = if init_old {
                NODE_AGENT_OLD
            } else {
                NODE_AGENT_NEW
            };
            containers.push((
                "kube_pod_init_container_info",
                "node-agent-init",
                init_image.image(),
                init_image.image(),
                image_id(init_old, IdForm::RepoDigest),
                Some(""),
            ));
            if c == 7 && p == 0 {
                containers.push((
                    "kube_pod_init_container_info",
                    "node-agent-cache",
                    NODE_AGENT_OLD.image(),
                    NODE_AGENT_OLD.image(),
                    NODE_AGENT_OLD.image_id(),
                    Some("Always"),
                ));
            }
            for (family, container, spec, status_image, id, restart) in &containers {
                let mut labels: Vec<(&str, &str)> = pod_labels.to_vec();
                labels.extend([
                    ("container", *container),
                    ("image_spec", spec.as_str()),
                    ("image", status_image.as_str()),
                    ("image_id", id.as_str()),
                    ("container_id", cid.as_str()),
                ]);
                if let Some(r) = restart {
                    labels.push(("restart_policy", r));
                }
                let buf = ds.family(family, "gauge");
                for t in &ts {
                    push_sample(buf, family, &labels, 1.0, *t);
                }
            }
            if let Some(current) = pod.phase {
                let buf = ds.family("kube_pod_status_phase", "gauge");
                for phase in ["Pending", "Succeeded", "Failed", "Unknown", "Running"] {
                    let mut labels = pod_labels.to_vec();
                    labels.push(("phase", phase));
                    let v = if phase == current { 1.0 } else { 0.0 };
                    for t in &ts {
                        push_sample(buf, "kube_pod_status_phase", &labels, v, *t);
                    }
                }
            }
        }
    }
    // kube-state-metrics v2.2: no image_spec label.
    let buf = ds.family("kube_pod_container_info", "gauge");
    for c in 0..3 {
        let cluster = format!("legacy-{c}");
        for p in 0..2 {
            let pod = format!("node-agent-l{c}{p}");
            let id = NODE_AGENT_NEW.image_id();
            let image = NODE_AGENT_NEW.image();
            let labels = [
                ("cluster", cluster.as_str()),
                ("namespace", LEGACY_NAMESPACE),
                ("pod", pod.as_str()),
                ("uid", "0"),
                ("container", "node-agent"),
                ("image", image.as_str()),
                ("image_id", id.as_str()),
                ("container_id", "containerd://l"),
            ];
            for t in &ts {
                push_sample(buf, "kube_pod_container_info", &labels, 1.0, *t);
            }
        }
    }
}

/// Argo CD's destinations: `https://site-NN.edge.acme.internal:6443`, NN 00..07, one
/// Application `node-agent-site-NN` each (project `edge`) from one central Argo CD:
/// site-02 OutOfSync/Healthy, site-03 Synced/Degraded, site-04 Synced/Progressing (operation
/// sync), site-05 has no Application (silent), site-06 Unknown/Unknown (destination
/// unreachable); the others Synced/Healthy. A `log-shipper-site-NN` Application per
/// destination, OutOfSync everywhere, is not selected by `name=~"node-agent-.*"`.
pub fn argocd_destinations() -> Vec<String> {
    (0..8)
        .map(|i| format!("https://site-{i:02}.edge.acme.internal:6443"))
        .collect()
}

/// Writes `argocd_app_info` as the application controller exports it.
pub fn write_argocd(ds: &mut Dataset, base: i64) {
    let ts: Vec<i64> = times(base, FROM, TO, STEP).collect();
    let buf = ds.family("argocd_app_info", "gauge");
    for (i, dest) in argocd_destinations().iter().enumerate() {
        let apps: Vec<(String, &str, &str, &str)> = {
            let site = format!("site-{i:02}");
            let (sync, health, op) = match i {
                2 => ("OutOfSync", "Healthy", ""),
                3 => ("Synced", "Degraded", ""),
                4 => ("Synced", "Progressing", "sync"),
                6 => ("Unknown", "Unknown", ""),
                _ => ("Synced", "Healthy", ""),
            };
            let mut apps = vec![(format!("log-shipper-{site}"), "OutOfSync", "Healthy", "")];
            if i != 5 {
                apps.push((format!("node-agent-{site}"), sync, health, op));
            }
            apps
        };
        for (name, sync, health, op) in &apps {
            let labels = [
                ("cluster", "hub"),
                ("job", "argocd-metrics"),
                ("namespace", "argocd"),
                ("name", name.as_str()),
                ("project", "edge"),
                ("autosync_enabled", "true"),
                ("repo", "https://github.com/acme/fleet"),
                ("dest_server", dest.as_str()),
                ("dest_namespace", KSM_NAMESPACE),
                ("sync_status", sync),
                ("health_status", health),
                ("operation", op),
            ];
            for t in &ts {
                push_sample(buf, "argocd_app_info", &labels, 1.0, *t);
            }
        }
    }
}

/// The revision every Flux cluster should have applied.
pub const FLUX_NEW: &str = "main@sha1:5f1c0e3b9a7d2c4e6f8a0b1c3d5e7f9a1b2c3d4e";
/// The revision it replaces.
pub const FLUX_OLD: &str = "main@sha1:0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e";

/// Flux clusters `flux-0`..`flux-5`, one Kustomization `edge-agents` in `flux-system` each:
/// flux-1 still on `FLUX_OLD` (Ready True), flux-2 on `FLUX_NEW` but Ready False, flux-3 on
/// `FLUX_NEW` with Ready Unknown (reconciling), flux-4 silent for 2 h; the others on `FLUX_NEW`,
/// Ready True.
pub fn flux_clusters() -> Vec<String> {
    (0..6).map(|i| format!("flux-{i}")).collect()
}

/// Writes `gotk_resource_info` as kube-state-metrics' custom-resource-state writes it.
pub fn write_flux(ds: &mut Dataset, base: i64) {
    let buf = ds.family("gotk_resource_info", "gauge");
    for (i, cluster) in flux_clusters().iter().enumerate() {
        let (revision, ready) = match i {
            1 => (FLUX_OLD, "True"),
            2 => (FLUX_NEW, "False"),
            3 => (FLUX_NEW, "Unknown"),
            4 => (FLUX_OLD, "True"),
            _ => (FLUX_NEW, "True"),
        };
        let labels = [
            ("cluster", cluster.as_str()),
            ("job", "kube-state-metrics"),
            ("customresource_group", "kustomize.toolkit.fluxcd.io"),
            ("customresource_kind", "Kustomization"),
            ("customresource_version", "v1"),
            ("exported_namespace", "flux-system"),
            ("name", "edge-agents"),
            ("ready", ready),
            ("suspended", "false"),
            ("revision", revision),
            ("source_name", "flux-system"),
        ];
        let (from, to) = if i == 4 {
            (-3 * 3600, -2 * 3600)
        } else {
            (FROM, TO)
        };
        for t in times(base, from, to, STEP) {
            push_sample(buf, "gotk_resource_info", &labels, 1.0, t);
        }
    }
}

/// Every inventory of this module as one OpenMetrics text based at `base`.
pub fn inventories_dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    write_ksm(&mut ds, base);
    write_argocd(&mut ds, base);
    write_flux(&mut ds, base);
    ds.finish()
}

/// Namespace of the promotion fleet.
pub const PROMO_NAMESPACE: &str = "edge-promo";
/// The cluster registry the promotion fleet's inventory comes from (`expectedTargetsQuery`).
pub const PROMO_REGISTRY: &str = "rollgate_test_cluster_registry";
/// Namespace of the support-window fleet.
pub const WINDOW_NAMESPACE: &str = "edge-window";

/// The promotion fleet's 27 registered clusters `promo-00`..`promo-26`.
pub fn promo_clusters() -> Vec<String> {
    (0..27).map(|i| format!("promo-{i:02}")).collect()
}

/// Per cluster of the promotion fleet, its node-agent pods as (old image?, from, to), seconds
/// relative to base:
///
/// | cluster | pods | at base |
/// |---|---|---|
/// | promo-00..09 | two pods on 1.5.0 | current |
/// | promo-02 | + a pod on 1.4.2 from -9m to -7m30s (visible to -2m30s: the 5m lookback) | current, flapped within 10m |
/// | promo-10..12 | one pod on 1.5.0, one on 1.4.2 | mid-change |
/// | promo-13..26 | two pods on 1.4.2 | straggler |
///
/// promo-05 also has a DaemonSet `node-agent` with 1 of 2 pods not updated (stalled).
pub fn promo_pods(cluster: usize) -> Vec<(bool, i64, i64)> {
    let all = (FROM, TO);
    match cluster {
        0..=9 => {
            let mut pods = vec![(false, all.0, all.1), (false, all.0, all.1)];
            if cluster == 2 {
                pods.push((true, -540, -450));
            }
            pods
        }
        10..=12 => vec![(false, all.0, all.1), (true, all.0, all.1)],
        _ => vec![(true, all.0, all.1), (true, all.0, all.1)],
    }
}

/// The support-window fleet: `win-0`..`win-5` in namespace `edge-window`, two pods each, the
/// version in the `image` label: win-0..2 on 1.5.0 (N), win-3..4 on 1.4.2 (N-1), win-5 on
/// 1.3.0 (N-2).
pub fn window_clusters() -> Vec<String> {
    (0..6).map(|i| format!("win-{i}")).collect()
}

/// The image of a support-window cluster.
pub fn window_image(cluster: usize) -> &'static str {
    match cluster {
        0..=2 => "docker.io/acme/node-agent:1.5.0",
        3 | 4 => "docker.io/acme/node-agent:1.4.2",
        _ => "docker.io/acme/node-agent:1.3.0",
    }
}

/// Namespace of the states fleet: one cluster per state the gate names.
pub const STATES_NAMESPACE: &str = "edge-states";
/// The states fleet's cluster registry (its `expectedTargetsQuery`).
pub const STATES_REGISTRY: &str = "rollgate_test_states_registry";

/// node-agent 1.3.0 (N-2 of the states fleet; N is `NODE_AGENT_NEW`, N-1 `NODE_AGENT_OLD`).
pub const NODE_AGENT_N2: Image = Image {
    repo: "docker.io/acme/node-agent",
    tag: "1.3.0",
    digest: "61324d2bb3c5dbb4b2cd8f3ad0a1c4e2b6a95d7f0e8c3b1a2d4f6e8a0c2b4d6f",
};

/// The states fleet's registered clusters `st-00`..`st-19`.
pub fn states_clusters() -> Vec<String> {
    (0..20).map(|i| format!("st-{i:02}")).collect()
}

/// The states fleet, per cluster: two node-agent pods, sampled every minute from base-1h to
/// base+1h unless said, `image_id` as containerd writes it unless said.
///
/// | cluster | pods | state at base (holdFor 20m, support window N-1) |
/// |---|---|---|
/// | st-00..09, st-17, st-19 | N | current (st-17 is in no cohort) |
/// | st-10 | N-2 as `docker-pullable://repo@sha256:6132...` | straggler |
/// | st-11 | N-2 as `repo@sha256:6132...` | straggler |
/// | st-12 | N, DaemonSet 1 of 2 pods not updated since base-50m | stalled |
/// | st-13 | N-1 | supported |
/// | st-14 | N + a pod on N-2 from -9m to -7m30s (visible to -2m30s) | not held |
/// | st-15 | N until base-40m | silent |
/// | st-16 | N-2 | straggler, or excepted (the tests' exception) |
/// | st-18 | N-1, in no cohort | supported |
/// | st-90 (not registered) | N-1 | outside the inventory, supported |
/// | st-91 (not registered) | N-2 | outside the inventory, straggler |
pub fn states_pods(cluster: &str) -> Vec<(Image, IdForm, i64, i64)> {
    let all = |image| vec![(image, IdForm::RepoDigest, FROM, TO); 2];
    match cluster {
        "st-10" => vec![(NODE_AGENT_N2, IdForm::DockerPullable, FROM, TO); 2],
        "st-11" | "st-16" | "st-91" => all(NODE_AGENT_N2),
        "st-13" | "st-18" | "st-90" => all(NODE_AGENT_OLD),
        "st-14" => {
            let mut pods = all(NODE_AGENT_NEW);
            pods.push((NODE_AGENT_N2, IdForm::RepoDigest, -540, -450));
            pods
        }
        "st-15" => vec![(NODE_AGENT_NEW, IdForm::RepoDigest, FROM, -2400); 2],
        _ => all(NODE_AGENT_NEW),
    }
}

fn write_states(ds: &mut Dataset, base: i64) {
    let ns = STATES_NAMESPACE;
    let ts = |from: i64, to: i64| times(base, from, to, STEP);
    let mut clusters = states_clusters();
    let registered = clusters.len();
    clusters.extend(["st-90".to_string(), "st-91".to_string()]);
    for (c, cluster) in clusters.iter().enumerate() {
        if c < registered {
            let buf = ds.family(STATES_REGISTRY, "gauge");
            for t in ts(FROM, TO) {
                push_sample(
                    buf,
                    STATES_REGISTRY,
                    &[("cluster", cluster.as_str())],
                    1.0,
                    t,
                );
            }
        }
        for (p, (image, form, from, to)) in states_pods(cluster).into_iter().enumerate() {
            let pod = format!("node-agent-{cluster}-{p}");
            let id = match form {
                IdForm::DockerPullable => format!("docker-pullable://{}", image.image_id()),
                IdForm::RepoDigest => image.image_id(),
                IdForm::Bare => format!("sha256:{}", image.digest),
            };
            let spec = image.image();
            let labels = [
                ("cluster", cluster.as_str()),
                ("namespace", ns),
                ("pod", pod.as_str()),
                ("uid", "0"),
                ("container", "node-agent"),
                ("image_spec", spec.as_str()),
                ("image", spec.as_str()),
                ("image_id", id.as_str()),
                ("container_id", "containerd://s"),
            ];
            let buf = ds.family("kube_pod_container_info", "gauge");
            for t in ts(from, to) {
                push_sample(buf, "kube_pod_container_info", &labels, 1.0, t);
            }
        }
    }
    // st-12's DaemonSet: 2 desired and ready; 1 updated from base-50m on.
    let labels = [
        ("cluster", "st-12"),
        ("namespace", ns),
        ("daemonset", "node-agent"),
    ];
    for family in [
        "kube_daemonset_status_desired_number_scheduled",
        "kube_daemonset_status_updated_number_scheduled",
        "kube_daemonset_status_number_ready",
    ] {
        let buf = ds.family(family, "gauge");
        for t in ts(FROM, TO) {
            let stalled = family.contains("updated") && t >= base - 3000;
            push_sample(buf, family, &labels, if stalled { 1.0 } else { 2.0 }, t);
        }
    }
}

/// The promotion, support-window and states fleets (and the cluster registries) as
/// OpenMetrics text.
pub fn promotion_dataset(base: i64) -> String {
    let mut ds = Dataset::new();
    let ns = PROMO_NAMESPACE;
    let ts = |from: i64, to: i64| times(base, from, to, STEP);
    for (c, cluster) in promo_clusters().iter().enumerate() {
        let buf = ds.family(PROMO_REGISTRY, "gauge");
        let region = if c < 14 { "eu" } else { "us" };
        for t in ts(FROM, TO) {
            push_sample(
                buf,
                PROMO_REGISTRY,
                &[("cluster", cluster.as_str()), ("region", region)],
                1.0,
                t,
            );
        }
        for (p, (old, from, to)) in promo_pods(c).into_iter().enumerate() {
            let image = if old { NODE_AGENT_OLD } else { NODE_AGENT_NEW };
            let pod = format!("node-agent-{c:02}{p}");
            let (spec, id) = (image.image(), image.image_id());
            let labels = [
                ("cluster", cluster.as_str()),
                ("namespace", ns),
                ("pod", pod.as_str()),
                ("uid", "0"),
                ("container", "node-agent"),
                ("image_spec", spec.as_str()),
                ("image", spec.as_str()),
                ("image_id", id.as_str()),
                ("container_id", "containerd://p"),
            ];
            let buf = ds.family("kube_pod_container_info", "gauge");
            for t in ts(from, to) {
                push_sample(buf, "kube_pod_container_info", &labels, 1.0, t);
            }
        }
    }
    // promo-05's DaemonSet: 2 desired, 1 updated, 2 ready.
    for (family, v) in [
        ("kube_daemonset_status_desired_number_scheduled", 2.0),
        ("kube_daemonset_status_updated_number_scheduled", 1.0),
        ("kube_daemonset_status_number_ready", 2.0),
    ] {
        let buf = ds.family(family, "gauge");
        let labels = [
            ("cluster", "promo-05"),
            ("namespace", ns),
            ("daemonset", "node-agent"),
        ];
        for t in ts(FROM, TO) {
            push_sample(buf, family, &labels, v, t);
        }
    }
    for (c, cluster) in window_clusters().iter().enumerate() {
        let image = window_image(c);
        for p in 0..2 {
            let pod = format!("node-agent-w{c}{p}");
            let labels = [
                ("cluster", cluster.as_str()),
                ("namespace", WINDOW_NAMESPACE),
                ("pod", pod.as_str()),
                ("uid", "0"),
                ("container", "node-agent"),
                ("image", image),
                ("image_id", "sha256:0"),
                ("container_id", "containerd://w"),
            ];
            let buf = ds.family("kube_pod_container_info", "gauge");
            for t in ts(FROM, TO) {
                push_sample(buf, "kube_pod_container_info", &labels, 1.0, t);
            }
        }
    }
    write_states(&mut ds, base);
    ds.finish()
}
