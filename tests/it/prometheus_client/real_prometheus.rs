//! The client and parser against a real Prometheus (Debian's 2.42) with backfilled data.
//! Skipped, with a note on stderr, when `prometheus`/`promtool` are not installed.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use rollgate::prometheus::{
    Backend, Client, PrometheusConfig, PrometheusError, QueryData, QueryRequest, Recorder, Replay,
};

const T0: i64 = 1_700_000_000;

fn at(offset: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(T0 + offset, 0).unwrap()
}

/// Three gauges over 30 minutes, one sample a minute; pod c is NaN, pod d is +Inf.
fn openmetrics() -> String {
    let mut text = String::from("# TYPE load gauge\n");
    for minute in 0..=30 {
        let ts = T0 + minute * 60;
        text.push_str(&format!(
            "load{{pod=\"a\",job=\"api\"}} {} {ts}\n",
            minute as f64 * 0.5
        ));
        text.push_str(&format!("load{{pod=\"b\",job=\"api\"}} 2 {ts}\n"));
        text.push_str(&format!("load{{pod=\"c\",job=\"api\"}} NaN {ts}\n"));
        text.push_str(&format!("load{{pod=\"d\",job=\"api\"}} +Inf {ts}\n"));
    }
    text.push_str("# EOF\n");
    text
}

fn installed() -> bool {
    Path::new("/usr/bin/prometheus").exists() && Path::new("/usr/bin/promtool").exists()
}

#[tokio::test]
async fn against_real_prometheus() {
    if !installed() {
        eprintln!("skipped: /usr/bin/prometheus or /usr/bin/promtool not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.om");
    let data = dir.path().join("tsdb");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(&input, openmetrics()).unwrap();
    std::fs::write(&config, "global: {}\n").unwrap();
    let status = std::process::Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&data)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=100y")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let address = format!("http://127.0.0.1:{port}");
    let ready = async {
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(r) = http.get(format!("{address}/-/ready")).send().await {
                if r.status().is_success() {
                    return true;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(ready.await, "prometheus did not become ready");

    let recorder = Recorder::new();
    let backend = Backend::Recording(Client::new(), recorder.clone());
    let cfg = PrometheusConfig::new(address.clone());
    let instant = |q: &str| QueryRequest::instant(q, Some(at(600)));

    // Vector with NaN and +Inf, labels sorted and complete.
    let r = backend.query(&cfg, &instant("load"), None).await.unwrap();
    let QueryData::Vector(v) = &r.data else {
        panic!("{r:?}")
    };
    assert_eq!(v.len(), 4);
    let by_pod = |pod: &str| v.iter().find(|s| s.labels.get("pod") == Some(pod)).unwrap();
    assert_eq!(by_pod("a").sample.value, 5.0);
    assert_eq!(by_pod("a").sample.timestamp, (T0 + 600) as f64);
    assert!(by_pod("c").sample.value.is_nan());
    assert_eq!(by_pod("d").sample.value, f64::INFINITY);
    assert_eq!(
        by_pod("b").labels.iter().collect::<Vec<_>>(),
        vec![("__name__", "load"), ("job", "api"), ("pod", "b")]
    );

    // Scalar.
    let r = backend
        .query(&cfg, &instant(r#"scalar(load{pod="b"}) * 2"#), None)
        .await
        .unwrap();
    assert!(matches!(r.data, QueryData::Scalar(s) if s.value == 4.0));

    // Range query: a matrix of 6 samples.
    let range = QueryRequest::Range {
        query: r#"load{pod="a"}"#.into(),
        start: at(0),
        end: at(300),
        step: Duration::from_secs(60),
    };
    let r = backend.query(&cfg, &range, None).await.unwrap();
    let QueryData::Matrix(m) = &r.data else {
        panic!("{r:?}")
    };
    assert_eq!(m.len(), 1);
    let values: Vec<f64> = m[0].samples.iter().map(|s| s.value).collect();
    assert_eq!(values, vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]);

    // A range-vector selector in an instant query is a matrix too.
    let r = backend
        .query(&cfg, &instant(r#"load{pod="b"}[3m]"#), None)
        .await
        .unwrap();
    // (4 samples in Prometheus 2's closed window, 3 in Prometheus 3's left-open one.)
    assert!(
        matches!(&r.data, QueryData::Matrix(m) if (3..=4).contains(&m[0].samples.len())
            && m[0].samples.iter().all(|s| s.value == 2.0)),
        "{r:?}"
    );

    // Empty vector.
    let r = backend
        .query(&cfg, &instant("nothing_here"), None)
        .await
        .unwrap();
    assert_eq!(r.data, QueryData::Vector(Vec::new()));

    // String results are refused; syntax errors are bad_data and not retried.
    let e = backend
        .query(&cfg, &instant(r#""hello""#), None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, PrometheusError::UnsupportedResultType { .. }),
        "{e:?}"
    );
    let e = backend
        .query(&cfg, &instant("sum(load"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PrometheusError::Api { status: 400, error_type, .. } if error_type == "bad_data"),
        "{e:?}"
    );
    assert!(!e.is_retryable());

    // Everything replays identically once the server is gone.
    let path = dir.path().join("recording.json");
    recorder.save(&path).unwrap();
    server.kill().await.unwrap();
    let replay = Backend::Replay(Replay::load(&path).unwrap());
    let live = Backend::Live(Client::new());
    let r = replay.query(&cfg, &range, None).await.unwrap();
    assert!(matches!(&r.data, QueryData::Matrix(m) if m[0].samples.len() == 6));
    let e = replay
        .query(&cfg, &instant("sum(load"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(e, PrometheusError::Api { status: 400, .. }),
        "{e:?}"
    );
    let mut quick = cfg.clone();
    quick.retries = 0;
    assert!(matches!(
        live.query(&quick, &range, None).await,
        Err(PrometheusError::Connect { .. })
    ));
}
