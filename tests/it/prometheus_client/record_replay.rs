//! Recording live answers through `Backend::Recording`, then replaying them with no server.

use std::time::Duration;

use crate::support::stub::{json, Stub};
use chrono::{TimeZone, Utc};
use rollgate::prometheus::{
    Backend, Client, PrometheusConfig, PrometheusError, QueryRequest, Recorder, Replay,
};

#[tokio::test]
async fn record_then_replay_round_trip() {
    let stub = Stub::script(|req, _| match req.param("query").as_deref() {
        Some("sum(up)") => json(
            200,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"a"},"value":[1700000000,"3"]},{"metric":{"job":"b"},"value":[1700000000,"+Inf"]}]},"warnings":["w1"]}"#,
        ),
        Some("rate(x[5m])") => json(
            200,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"],[1700000060,"2"]]}]}}"#,
        ),
        _ => json(
            400,
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
        ),
    });
    let recorder = Recorder::new();
    let live = Backend::Recording(Client::new(), recorder.clone());
    let cfg = PrometheusConfig::new(stub.url.clone());
    let instant = QueryRequest::instant(
        "sum(up)",
        Some(Utc.timestamp_opt(1_700_000_000, 0).unwrap()),
    );
    let range = QueryRequest::Range {
        query: "rate(x[5m])".into(),
        start: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        end: Utc.timestamp_opt(1_700_000_060, 0).unwrap(),
        step: Duration::from_secs(60),
    };
    let broken = QueryRequest::instant("sum(", None);

    let live_instant = live.query(&cfg, &instant, None).await.unwrap();
    let live_range = live.query(&cfg, &range, None).await.unwrap();
    let live_error = live.query(&cfg, &broken, None).await.unwrap_err();
    assert_eq!(recorder.len(), 3);
    assert_eq!(live_instant.warnings, vec!["w1"]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("recording.json");
    recorder.save(&path).unwrap();
    drop(stub);

    // Another address entirely: replay does not care.
    let replayed = Backend::Replay(Replay::load(&path).unwrap());
    let elsewhere = PrometheusConfig::new("http://prometheus.invalid:9090");
    assert_eq!(
        replayed.query(&elsewhere, &instant, None).await.unwrap(),
        live_instant
    );
    assert_eq!(
        replayed.query(&elsewhere, &range, None).await.unwrap(),
        live_range
    );
    let replay_error = replayed.query(&elsewhere, &broken, None).await.unwrap_err();
    match (&live_error, &replay_error) {
        (
            PrometheusError::Api {
                status: s1,
                error_type: t1,
                message: m1,
                ..
            },
            PrometheusError::Api {
                status: s2,
                error_type: t2,
                message: m2,
                ..
            },
        ) => assert_eq!((s1, t1, m1), (s2, t2, m2)),
        other => panic!("{other:?}"),
    }

    let miss = replayed
        .query(
            &elsewhere,
            &QueryRequest::instant("never_recorded", None),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(miss, PrometheusError::ReplayMiss { .. }),
        "{miss:?}"
    );
    assert!(miss.to_string().contains("never_recorded"), "{miss}");
}

#[tokio::test]
async fn recorder_keeps_final_answers_only() {
    let stub = Stub::script(|_, i| {
        if i == 0 {
            json(503, "busy")
        } else {
            json(
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"5"]}}"#,
            )
        }
    });
    let recorder = Recorder::new();
    let backend = Backend::Recording(Client::new(), recorder.clone());
    let req = QueryRequest::instant("up", None);
    backend
        .query(&PrometheusConfig::new(stub.url.clone()), &req, None)
        .await
        .unwrap();
    assert_eq!(stub.requests(), 2);
    assert_eq!(recorder.len(), 1);
    let replay = Replay::from_json(&recorder.to_json()).unwrap();
    assert!(replay.answer(&req).is_ok());

    // A failure with no HTTP answer records nothing.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = PrometheusConfig::new(format!("http://127.0.0.1:{port}"));
    cfg.retries = 0;
    assert!(backend.query(&cfg, &req, None).await.is_err());
    assert_eq!(recorder.len(), 1);
}
