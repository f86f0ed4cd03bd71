//! Self-test of the test support in `tests/support`: every generated scenario is checked with
//! real PromQL against a real Prometheus, and the fault stub is checked with real HTTP clients.
//! It does not use the rollgate library.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::prom::{self, shared, PromServer};
use support::scenarios::*;
use support::stub::{self, Mode, Stub};

/// |a - b| within `rel` of b (or `abs`, whichever is larger).
fn near(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= (rel * b.abs()).max(abs)
}

fn set<I: IntoIterator<Item = String>>(i: I) -> BTreeSet<String> {
    i.into_iter().collect()
}

fn by_label(samples: &[prom::Sample], label: &str) -> BTreeMap<String, f64> {
    samples
        .iter()
        .map(|s| (s.labels.get(label).cloned().unwrap_or_default(), s.value))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

// ------------------------------------------------------------------------------------------
// Request counters
// ------------------------------------------------------------------------------------------

#[test]
fn documented_traffic_figures_hold_in_the_generator() {
    assert_eq!(HEALTHY.rps(), 100.0);
    assert!(near(HEALTHY.error_ratio(), 0.001, 1e-12, 0.0));
    assert!(near(DOUBLE.error_ratio(), 0.002, 1e-12, 0.0));
    assert!(near(BAD.error_ratio(), 0.05, 1e-12, 0.0));
    assert_eq!(
        (HEALTHY.requests(300), HEALTHY.errors_in(300)),
        (30000.0, 30.0)
    );
    assert_eq!((BAD.requests(300), BAD.errors_in(300)), (30000.0, 1500.0));
    assert_eq!(LOWTRAFFIC.requests(300), 15.0);
    assert!(IDLE.error_ratio().is_nan());
    let w = COMPARE_WINDOW;
    let counts = |t: &Traffic| (t.requests(w), t.errors_in(w));
    assert_eq!(counts(&CMP_HEALTHY_CANARY), (24000.0, 120.0));
    assert_eq!(counts(&CMP_HEALTHY_STABLE), (26400.0, 132.0));
    assert_eq!(counts(&CMP_BAD_CANARY), (24000.0, 720.0));
    assert_eq!(counts(&CMP_BAD_STABLE), (26400.0, 132.0));
    assert_eq!(counts(&CMP_6X_CANARY), (24000.0, 144.0));
    assert_eq!(counts(&CMP_6X_STABLE), (24000.0, 24.0));
    assert_eq!(counts(&CMP_NOCANARY_STABLE), (24000.0, 120.0));
    assert_eq!(counts(&CMP_LOW_CANARY), (20.0, 1.0));
    assert_eq!(counts(&CMP_LOW_STABLE), (24000.0, 120.0));
    assert!(near(
        CMP_6X_CANARY.error_ratio() / CMP_6X_STABLE.error_ratio(),
        6.0,
        1e-12,
        0.0
    ));
}

#[test]
fn traffic_at_base_matches_the_documented_figures_exactly() {
    let p = shared();
    let at = p.base as f64;
    for t in TRAFFIC.iter().filter(|t| t.stop.is_none()) {
        for (window, secs) in [("5m", 300), ("10m", 600)] {
            let want = t.requests(secs);
            if t.ok.increase(secs).fract() != 0.0 || t.errors_in(secs).fract() != 0.0 {
                continue; // not a whole count: Prometheus sees the floor of each counter
            }
            let got = p.query_one(&t.total_query(window), at);
            assert_eq!(got, want, "{} total over {window}", t.matchers());
            let bad = p.query_one(&t.bad_query(window), at);
            assert_eq!(bad, t.errors_in(secs), "{} 5xx over {window}", t.matchers());
            let ratio = p.query_one(&t.ratio_query(window), at);
            if t.rps() == 0.0 {
                assert!(
                    ratio.is_nan(),
                    "{}: 0/0 must be NaN, got {ratio}",
                    t.matchers()
                );
            } else {
                assert!(
                    near(ratio, t.error_ratio(), 1e-9, 0.0),
                    "{}: ratio {ratio} != {}",
                    t.matchers(),
                    t.error_ratio()
                );
            }
        }
    }
}

#[test]
fn traffic_is_queryable_at_now_too() {
    let p = shared();
    let now = prom::now();
    assert!(now >= p.base as f64 && now < (p.base + TO) as f64);
    for t in TRAFFIC.iter().filter(|t| t.stop.is_none() && t.rps() > 0.0) {
        let got = p.query_one(&t.total_query("5m"), now);
        let want = t.requests(300);
        assert!(
            near(got, want, 0.06, 2.0),
            "{} total at now: {got} vs {want}",
            t.matchers()
        );
        let errors = t.errors_in(300);
        if errors >= 10.0 {
            // Each counter is off by at most about one event at an unaligned time.
            let ratio = p.query_one(&t.ratio_query("5m"), now);
            let tolerance = 0.02 + 1.5 / errors;
            assert!(
                near(ratio, t.error_ratio(), tolerance, 0.0),
                "{}: {ratio} vs {}",
                t.matchers(),
                t.error_ratio()
            );
        }
    }
}

#[test]
fn low_traffic_is_below_a_guard_of_300_and_idle_is_nan() {
    let p = shared();
    let at = p.base as f64;
    assert_eq!(p.query_one(&LOWTRAFFIC.total_query("5m"), at), 15.0);
    assert_eq!(p.query_one(&LOWTRAFFIC.ratio_query("5m"), at), 0.0);
    assert_eq!(p.query_one(&IDLE.total_query("5m"), at), 0.0);
    assert!(p.query_one(&IDLE.ratio_query("5m"), at).is_nan());
}

#[test]
fn absent_service_has_no_series_at_all() {
    let p = shared();
    for q in [
        format!("http_requests_total{{service=\"{ABSENT_SERVICE}\"}}"),
        format!("sum(rate(http_requests_total{{service=\"{ABSENT_SERVICE}\"}}[5m]))"),
        format!("last_over_time(http_requests_total{{service=\"{ABSENT_SERVICE}\"}}[1d])"),
    ] {
        assert!(p.query(&q, p.base as f64).is_empty(), "{q}");
    }
    // The same query shape finds the healthy service, so emptiness is not a query mistake.
    assert!(!p
        .query("http_requests_total{service=\"healthy\"}", p.base as f64)
        .is_empty());
}

#[test]
fn stale_series_end_ten_minutes_before_base() {
    let p = shared();
    let stop = (p.base + STALE.stop.unwrap()) as f64;
    let sel = format!("http_requests_total{{{}}}", STALE.matchers());
    assert!(p.query(&sel, p.base as f64).is_empty());
    assert!(p.query(&STALE.ratio_query("5m"), p.base as f64).is_empty());
    assert_eq!(p.query(&sel, stop).len(), 2);
    assert_eq!(p.query(&sel, stop + 300.0).len(), 2, "5 m lookback");
    assert!(p.query(&sel, stop + 301.0).is_empty());
    assert_eq!(
        p.query(&format!("last_over_time({sel}[1h])"), p.base as f64)
            .len(),
        2
    );
    assert!(near(
        p.query_one(&STALE.ratio_query("5m"), stop),
        0.001,
        1e-9,
        0.0
    ));
}

#[test]
fn compare_pairs_have_the_documented_ten_minute_counts() {
    let p = shared();
    let at = p.base as f64;
    let pairs = [
        ("cmp-healthy", Some(CMP_HEALTHY_CANARY), CMP_HEALTHY_STABLE),
        ("cmp-bad", Some(CMP_BAD_CANARY), CMP_BAD_STABLE),
        ("cmp-6x", Some(CMP_6X_CANARY), CMP_6X_STABLE),
        ("cmp-nocanary", None, CMP_NOCANARY_STABLE),
        ("cmp-low", Some(CMP_LOW_CANARY), CMP_LOW_STABLE),
    ];
    for (service, canary, stable) in pairs {
        assert_eq!(stable.service, service);
        assert_eq!(stable.track, "stable");
        for t in canary.iter().chain([&stable]) {
            assert_eq!(
                p.query_one(&t.total_query("10m"), at),
                t.requests(COMPARE_WINDOW),
                "{}",
                t.matchers()
            );
            assert_eq!(
                p.query_one(&t.bad_query("10m"), at),
                t.errors_in(COMPARE_WINDOW),
                "{}",
                t.matchers()
            );
        }
        let canary_q = format!(
            "sum(increase(http_requests_total{{service=\"{service}\",track=\"canary\"}}[10m]))"
        );
        assert_eq!(p.query(&canary_q, at).is_empty(), canary.is_none());
    }
}

// ------------------------------------------------------------------------------------------
// Latency, overflow, special values
// ------------------------------------------------------------------------------------------

fn p99_series(p: &PromServer, l: &Latency) -> Vec<f64> {
    let end = p.base as f64;
    let r = p.query_range(&l.quantile_query(0.99, "1m"), end - 1800.0, end, 60.0);
    assert_eq!(r.len(), 1, "{r:?}");
    r[0].points.iter().map(|(_, v)| *v).collect()
}

#[test]
fn latency_pairs_give_real_samples_with_the_documented_shift() {
    let p = shared();
    let mut medians = BTreeMap::new();
    for l in LATENCY {
        let v = p99_series(p, l);
        assert_eq!(v.len(), 31, "{} {}", l.service, l.track);
        assert!(v.iter().all(|x| x.is_finite() && *x > 0.0));
        let distinct: BTreeSet<u64> = v.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() >= 20, "{} {}: {v:?}", l.service, l.track);
        let m = median(v);
        assert!(
            near(m, l.true_quantile(0.99), 0.1, 0.0),
            "{} {}: median p99 {m} vs true {}",
            l.service,
            l.track,
            l.true_quantile(0.99)
        );
        medians.insert((l.service, l.track), m);
    }
    let shift = medians[&("lat-shift", "canary")] / medians[&("lat-shift", "stable")];
    let same = medians[&("lat-same", "canary")] / medians[&("lat-same", "stable")];
    eprintln!("p99 medians {medians:?}: shift ratio {shift:.3}, same ratio {same:.3}");
    assert!((1.3..1.6).contains(&shift), "lat-shift ratio {shift}");
    assert!((0.93..1.07).contains(&same), "lat-same ratio {same}");
    assert!(near(
        LAT_SHIFT_STABLE.true_quantile(0.99),
        0.2303,
        0.001,
        0.0
    ));
    assert!(near(
        LAT_SHIFT_CANARY.true_quantile(0.99),
        0.3224,
        0.001,
        0.0
    ));
}

#[test]
fn overflow_histogram_quantiles() {
    let p = shared();
    let at = p.base as f64;
    let q = |quantile: f64| {
        p.query_one(
            &format!(
                "histogram_quantile({quantile}, sum by (le) (rate(http_request_duration_seconds_bucket{{service=\"{OVERFLOW_SERVICE}\"}}[5m])))"
            ),
            at,
        )
    };
    assert!(near(q(0.5), OVERFLOW_P50, 1e-9, 0.0), "p50 {}", q(0.5));
    // The quantile falls into the +Inf bucket: Prometheus answers the largest finite bound.
    assert_eq!(q(0.99), OVERFLOW_P99);
    assert_eq!(q(0.99), *OVERFLOW_BUCKETS.last().unwrap());
    let gauge = p.query_one(
        &format!("{P99_GAUGE}{{service=\"{OVERFLOW_SERVICE}\"}}"),
        at,
    );
    assert_eq!(gauge, f64::INFINITY);
}

#[test]
fn special_values_reach_the_api_as_written() {
    let p = shared();
    let got = by_label(&p.query(SPECIAL_METRIC, p.base as f64), "case");
    assert_eq!(got.len(), SPECIAL_CASES.len());
    for (case, want) in SPECIAL_CASES {
        let v = got[*case];
        assert!(
            v == *want || (v.is_nan() && want.is_nan()),
            "{case}: {v} != {want}"
        );
    }
}

// ------------------------------------------------------------------------------------------
// Fleet
// ------------------------------------------------------------------------------------------

/// Checks a fleet as Prometheus serves it against `FleetParams::expect` at time `at`.
fn check_fleet(p: &PromServer, f: &FleetParams, at: f64) {
    let e = f.expect();
    let sel = format!(
        "namespace=\"{}\",container=\"{}\"",
        f.namespace, f.container
    );
    let (new_id, old_id) = (f.new.image_id(), f.old.image_id());
    let per_version = by_label(
        &p.query(
            &format!("count by (image_id) (kube_pod_container_info{{{sel}}})"),
            at,
        ),
        "image_id",
    );
    assert_eq!(per_version.get(&new_id).copied(), Some(e.pods_new as f64));
    assert_eq!(
        per_version.get(&old_id).copied().unwrap_or(0.0),
        e.pods_old as f64
    );
    assert_eq!(
        per_version.get("").copied().unwrap_or(0.0),
        e.pods_unlabelled as f64
    );
    assert_eq!(
        per_version.len(),
        1 + usize::from(e.pods_old > 0) + usize::from(e.pods_unlabelled > 0)
    );

    let reporting = set(by_label(
        &p.query(
            &format!("count by (cluster) (kube_pod_container_info{{{sel}}})"),
            at,
        ),
        "cluster",
    )
    .into_keys());
    let inventory = set(e.inventory.clone());
    let silent: BTreeSet<String> = inventory.difference(&reporting).cloned().collect();
    assert_eq!(silent, set(e.silent.clone()));
    let unexpected: BTreeSet<String> = reporting.difference(&inventory).cloned().collect();
    assert_eq!(unexpected, set(e.unexpected.iter().map(|u| u.0.clone())));

    let old_by_cluster = by_label(
        &p.query(
            &format!("count by (cluster) (kube_pod_container_info{{{sel},image_id=\"{old_id}\"}})"),
            at,
        ),
        "cluster",
    );
    let mut want_old: BTreeMap<String, f64> = e
        .stragglers
        .iter()
        .map(|s| (s.cluster.clone(), s.old_pods as f64))
        .collect();
    for (name, v) in &e.unexpected {
        if *v == Version::Old {
            want_old.insert(name.clone(), f.pods as f64);
        }
    }
    assert_eq!(old_by_cluster, want_old);

    let not_new = set(by_label(
        &p.query(
            &format!(
                "count by (cluster) (kube_pod_container_info{{{sel},image_id!=\"{new_id}\"}})"
            ),
            at,
        ),
        "cluster",
    )
    .into_keys());
    let current: BTreeSet<String> = reporting
        .intersection(&inventory)
        .filter(|c| !not_new.contains(*c))
        .cloned()
        .collect();
    assert_eq!(current, set(e.current.clone()));
    let missing = set(by_label(
        &p.query(
            &format!("count by (cluster) (kube_pod_container_info{{{sel},image_id=\"\"}})"),
            at,
        ),
        "cluster",
    )
    .into_keys());
    assert_eq!(missing, set(e.missing_version.iter().map(|m| m.0.clone())));

    if let Some(init) = &f.init_container {
        let isel = format!("namespace=\"{}\",container=\"{init}\"", f.namespace);
        let init_old = set(by_label(
            &p.query(
                &format!(
                    "count by (cluster) (kube_pod_init_container_info{{{isel},image_id=\"{old_id}\"}})"
                ),
                at,
            ),
            "cluster",
        )
        .into_keys());
        let mut want: BTreeSet<String> = set(e.straggler_names(true));
        want.extend(
            e.unexpected
                .iter()
                .filter(|u| u.1 == Version::Old)
                .map(|u| u.0.clone()),
        );
        assert_eq!(init_old, want);
        let counts = by_label(
            &p.query(
                &format!("count by (image_id) (kube_pod_init_container_info{{{isel}}})"),
                at,
            ),
            "image_id",
        );
        assert_eq!(counts.get(&new_id).copied(), Some(e.init_new as f64));
        assert_eq!(
            counts.get(&old_id).copied().unwrap_or(0.0),
            e.init_old as f64
        );
    }

    // Stalled workloads, found the way an alert rule would.
    let ns = format!("namespace=\"{}\"", f.namespace);
    let mut stalled: Vec<(String, &str)> = vec![];
    let ds = p.query(
        &format!(
            "kube_daemonset_status_updated_number_scheduled{{{ns}}} < kube_daemonset_status_desired_number_scheduled{{{ns}}} \
             or kube_daemonset_status_number_ready{{{ns}}} < kube_daemonset_status_desired_number_scheduled{{{ns}}}"
        ),
        at,
    );
    stalled.extend(
        ds.iter()
            .map(|s| (s.labels["cluster"].clone(), "DaemonSet")),
    );
    let deploy = p.query(
        &format!(
            "kube_deployment_status_replicas_updated{{{ns}}} < kube_deployment_spec_replicas{{{ns}}} \
             or kube_deployment_status_observed_generation{{{ns}}} < kube_deployment_metadata_generation{{{ns}}}"
        ),
        at,
    );
    stalled.extend(
        deploy
            .iter()
            .map(|s| (s.labels["cluster"].clone(), "Deployment")),
    );
    let sts = p.query(
        &format!(
            // kubernetes-mixin's KubeStatefulSetUpdateNotRolledOut: revisions differ and
            // replicas lag (the OnDelete StatefulSet, revisions differing, is done).
            "max without (revision) (kube_statefulset_status_current_revision{{{ns}}} unless on (cluster, namespace, statefulset, revision) kube_statefulset_status_update_revision{{{ns}}}) * on (cluster, namespace, statefulset) (kube_statefulset_replicas{{{ns}}} != on (cluster, namespace, statefulset) kube_statefulset_status_replicas_updated{{{ns}}})"
        ),
        at,
    );
    stalled.extend(
        sts.iter()
            .map(|s| (s.labels["cluster"].clone(), "StatefulSet")),
    );
    stalled.sort();
    let mut want: Vec<(String, &str)> = e
        .stalled
        .iter()
        .map(|w| (w.cluster.clone(), w.kind))
        .collect();
    want.sort();
    assert_eq!(stalled, want);
    if let Some(w) = e.stalled.iter().find(|w| w.kind == "DaemonSet") {
        let one = |m: &str| {
            p.query_one(
                &format!(
                    "{m}{{{ns},cluster=\"{}\",daemonset=\"{}\"}}",
                    w.cluster, w.name
                ),
                at,
            )
        };
        let n = f.pods as f64;
        assert_eq!(
            (
                one("kube_daemonset_status_desired_number_scheduled"),
                one("kube_daemonset_status_number_ready"),
                one("kube_daemonset_status_updated_number_scheduled")
            ),
            (n, n - 1.0, 1.0)
        );
    }

    // Silent clusters were last seen `silent_for` ago.
    for c in &e.silent {
        let q = format!("count(kube_pod_container_info{{{sel},cluster=\"{c}\"}})");
        let last = (p.base - f.silent_for) as f64;
        assert_eq!(p.query_one(&q, last), f.pods as f64);
        assert!(p.query(&q, last + 301.0).is_empty());
        let seen =
            format!("count(last_over_time(kube_pod_container_info{{{sel},cluster=\"{c}\"}}[3h]))");
        assert_eq!(p.query_one(&seen, at), f.pods as f64);
    }
}

#[test]
fn standard_fleet_matches_its_documentation() {
    let e = standard_fleet().expect();
    assert_eq!(e.inventory.len(), 400);
    assert_eq!(e.inventory.first().unwrap(), "edge-000");
    assert_eq!(e.inventory.last().unwrap(), "edge-399");
    assert_eq!(e.stragglers.len(), 12);
    assert_eq!(e.stragglers.iter().map(|s| s.old_pods).sum::<usize>(), 24);
    assert_eq!(e.silent, vec!["edge-058", "edge-311"]);
    assert_eq!(e.current.len(), 385);
    assert_eq!(e.current_names(true).len(), 384);
    assert_eq!(e.init_stragglers, vec!["edge-120"]);
    assert_eq!(e.straggler_names(true).len(), 13);
    assert_eq!((e.pods_new, e.pods_old, e.pods_unlabelled), (1169, 27, 1));
    assert_eq!((e.init_new, e.init_old), (1169, 28));
    assert_eq!(
        e.unexpected,
        vec![("edge-lab-01".to_string(), Version::Old)]
    );
    assert_eq!(e.missing_version.len(), 1);
    assert_eq!(e.missing_version[0].0, "edge-250");
    let stalled: Vec<(&str, &str)> = e
        .stalled
        .iter()
        .map(|w| (w.cluster.as_str(), w.kind))
        .collect();
    assert_eq!(
        stalled,
        vec![
            ("edge-203", "DaemonSet"),
            ("edge-150", "Deployment"),
            ("edge-330", "StatefulSet")
        ]
    );
    // Every inventory cluster has exactly one role.
    let mut roles: Vec<String> = e.current.clone();
    roles.extend(e.stragglers.iter().map(|s| s.cluster.clone()));
    roles.extend(e.silent.iter().cloned());
    roles.extend(e.missing_version.iter().map(|m| m.0.clone()));
    roles.sort();
    assert_eq!(roles, e.inventory);
    assert!(e
        .stragglers
        .iter()
        .any(|s| s.cluster == "edge-203" && s.old_pods == 2));
}

#[test]
fn standard_fleet_as_served_by_prometheus() {
    let p = shared();
    check_fleet(p, &standard_fleet(), p.base as f64);
    check_fleet(p, &standard_fleet(), prom::now());
}

#[test]
fn clean_fleet_is_entirely_current() {
    let p = shared();
    let f = clean_fleet();
    let e = f.expect();
    assert_eq!((e.pods_new, e.pods_old, e.current.len()), (1200, 0, 400));
    assert!(e.stalled.is_empty() && e.silent.is_empty() && e.unexpected.is_empty());
    check_fleet(p, &f, p.base as f64);
}

#[test]
fn fleet_generator_scales_and_stays_consistent() {
    let f = big_fleet(2000, 30);
    let e = f.expect();
    let reporting_pods = (2000 - e.silent.len() + e.unexpected.len()) * 30;
    assert_eq!(e.pods_new + e.pods_old + e.pods_unlabelled, reporting_pods);
    assert_eq!(e.stalled.len(), 3);
    let text = fleet_dataset(&f, 1_800_000_000);
    let lines = text
        .lines()
        .filter(|l| l.starts_with("kube_pod_container_info"))
        .count();
    // 6 samples per reporting pod, 13 per silent pod (one hour every 5 m).
    assert_eq!(lines, reporting_pods * 6 + e.silent.len() * 30 * 13);
    assert!(!text.contains("kube_pod_init_container_info"));
    let pods: BTreeSet<String> = (0..30).map(|i| f.pod_name("edge-00001", i)).collect();
    assert_eq!(pods.len(), 30, "pod names are unique within a cluster");
}

// ------------------------------------------------------------------------------------------
// The server's life cycle
// ------------------------------------------------------------------------------------------

fn tiny(base: i64) -> String {
    let mut ds = Dataset::new();
    let buf = ds.family("tiny", "gauge");
    for t in times(base, -600, 600, 60) {
        push_sample(buf, "tiny", &[("k", "v")], (t - base) as f64, t);
    }
    ds.finish()
}

#[test]
fn a_dropped_server_is_killed_and_its_data_removed() {
    let base = base_now();
    let p = PromServer::start(base, &tiny(base));
    let pid = p.pid();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "prometheus");
    assert_eq!(p.query_one("tiny", base as f64), 0.0);
    assert_eq!(p.query_one("tiny", (base - 120) as f64), -120.0);
    let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
    let data = cmdline
        .split('\0')
        .find_map(|a| a.strip_prefix("--storage.tsdb.path="))
        .unwrap()
        .to_string();
    assert!(std::path::Path::new(&data).exists());
    let addr = p.addr;
    drop(p);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(!std::path::Path::new(&data).exists());
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
#[should_panic(expected = "promtool failed")]
fn a_broken_dataset_fails_with_promtool_output() {
    let _ = PromServer::start(base_now(), "this is not openmetrics\n");
}

#[test]
#[ignore = "benchmark of the 10,000-cluster fleet: run with --ignored --nocapture"]
fn big_fleet_start_up_time() {
    let clusters: usize = std::env::var("FLEET_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let base = base_now();
    let f = big_fleet(clusters, 30);
    let t0 = Instant::now();
    let text = fleet_dataset(&f, base);
    let generated = t0.elapsed();
    let size = text.len();
    let p = PromServer::start(base, &text);
    drop(text);
    let e = f.expect();
    let t1 = Instant::now();
    let count = p.query_one("count(kube_pod_container_info)", prom::now());
    let first_query = t1.elapsed();
    eprintln!(
        "fleet {clusters}x30: {} MB text generated in {generated:?}; backfill {:?}; ready {:?}; count query {first_query:?}",
        size / 1_000_000,
        p.timings.backfill,
        p.timings.ready
    );
    assert_eq!(count, (e.pods_new + e.pods_old + e.pods_unlabelled) as f64);
    check_fleet(&p, &f, p.base as f64);
}

// ------------------------------------------------------------------------------------------
// The fault stub
// ------------------------------------------------------------------------------------------

/// One raw HTTP/1.1 exchange on a fresh connection: (status, body).
fn raw(url: &str, request: &str) -> (u16, Vec<u8>) {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, out[split + 4..].to_vec())
}

fn get(url: &str) -> (u16, Vec<u8>) {
    raw(
        url,
        "GET /api/v1/query?query=up HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn stub_modes_answer_as_documented() {
    let s = Stub::start(Mode::Status(503, "overloaded".into()));
    assert_eq!(get(&s.url), (503, b"overloaded".to_vec()));

    s.set_mode(Mode::ApiError);
    let (code, body) = get(&s.url);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 400);
    assert_eq!(
        (
            v["status"].as_str(),
            v["errorType"].as_str(),
            v["error"].as_str()
        ),
        (
            Some("error"),
            Some("bad_data"),
            Some(stub::API_ERROR_MESSAGE)
        )
    );

    s.set_mode(Mode::Garbage);
    let (code, body) = get(&s.url);
    assert_eq!(code, 200);
    assert!(serde_json::from_slice::<serde_json::Value>(&body).is_err());

    s.set_mode(Mode::Warnings);
    let (code, body) = get(&s.url);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 200);
    assert_eq!(v["warnings"][0], stub::WARNING_MESSAGE);
    assert_eq!(v["data"]["result"][0]["value"][1], "0.5");

    for n in [10, 1000, 3_000_000] {
        s.set_mode(Mode::Huge(n));
        let (code, body) = get(&s.url);
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["status"], "success");
        if n >= 100 {
            assert_eq!(body.len(), n);
        }
        if n > 1000 {
            assert!(v["data"]["result"].as_array().unwrap().len() > 10_000);
        }
    }

    let fixed = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#;
    s.set_mode(Mode::Fixed(fixed.into()));
    assert_eq!(get(&s.url), (200, fixed.as_bytes().to_vec()));

    s.set_mode(Mode::Slow(
        Duration::from_millis(300),
        Box::new(Mode::Fixed("{}".into())),
    ));
    let t = Instant::now();
    assert_eq!(get(&s.url), (200, b"{}".to_vec()));
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(s.requests(), 9);
}

#[test]
fn stub_records_headers_and_bodies_plain_and_chunked() {
    let s = Stub::start(Mode::Fixed("{}".into()));
    let body = "query=sum%28up%29&time=1700000000.5";
    let req = format!(
        "POST /api/v1/query HTTP/1.1\r\nHost: x\r\nX-Scope-OrgID: team-a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw(&s.url, &req).0, 200);
    let r = s.last_request().unwrap();
    assert_eq!((r.method.as_str(), r.path()), ("POST", "/api/v1/query"));
    assert_eq!(r.header("x-scope-orgid"), Some("team-a"));
    assert_eq!(r.param("query").as_deref(), Some("sum(up)"));
    assert_eq!(r.param("time").as_deref(), Some("1700000000.5"));

    let req = "POST /api/v1/query?x=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n6\r\nquery=\r\n2\r\nup\r\n0\r\n\r\n";
    assert_eq!(raw(&s.url, req).0, 200);
    let r = s.last_request().unwrap();
    assert_eq!(r.body, b"query=up");
    assert_eq!(r.param("query").as_deref(), Some("up"));
    assert_eq!(r.param("x").as_deref(), Some("1"));
    assert_eq!(s.requests(), 2);
}

/// Reads one response with a Content-Length body from a kept-alive connection.
fn read_response(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    (status, body)
}

#[test]
fn stub_keeps_connections_alive_and_serves_concurrently() {
    let body = r#"{"status":"success"}"#;
    let s = Stub::start(Mode::Fixed(body.into()));
    // Keep-alive, then two pipelined requests, all on one connection.
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = "GET /api/v1/query?query=up HTTP/1.1\r\nHost: x\r\n\r\n";
    for _ in 0..3 {
        c.write_all(req.as_bytes()).unwrap();
        assert_eq!(read_response(&mut c), (200, body.as_bytes().to_vec()));
    }
    c.write_all(format!("{req}{req}").as_bytes()).unwrap();
    assert_eq!(read_response(&mut c).0, 200);
    assert_eq!(read_response(&mut c).0, 200);
    assert_eq!((s.connections(), s.requests()), (1, 5));

    let url = format!("{}/api/v1/query", s.url);
    runtime().block_on(async {
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let url = url.clone();
                tokio::spawn(async move {
                    // A client each: 40 connections at once.
                    let c = reqwest::Client::new();
                    let r = c
                        .post(&url)
                        .header("Authorization", format!("Bearer t{i}"))
                        .form(&[("query", "up")])
                        .send()
                        .await
                        .unwrap();
                    r.status().as_u16()
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), 200);
        }
    });
    assert_eq!(s.requests(), 45);
    assert_eq!(s.connections(), 41);
    let last = s.last_request().unwrap();
    assert!(last
        .header("authorization")
        .unwrap()
        .starts_with("Bearer t"));
    assert_eq!(last.param("query").as_deref(), Some("up"));
}

#[test]
fn never_answer_times_out_the_client_and_drop_releases_it() {
    let s = Stub::start(Mode::NeverAnswer);
    let url = format!("{}/api/v1/query?query=up", s.url);
    runtime().block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let t = Instant::now();
        let err = client.get(&url).send().await.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    });
    assert_eq!(s.requests(), 1);
    // A held connection is closed when the stub stops.
    let mut held = TcpStream::connect(s.addr).unwrap();
    held.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    held.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let addr = s.addr;
    let t = Instant::now();
    drop(s);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        t.elapsed()
    );
    let mut buf = [0u8; 16];
    assert_eq!(held.read(&mut buf).unwrap_or(0), 0);
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn closed_port_refuses_connections() {
    let url = stub::closed_port();
    runtime().block_on(async {
        let err = reqwest::get(format!("{url}/api/v1/query?query=up"))
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{err:?}");
    });
}
