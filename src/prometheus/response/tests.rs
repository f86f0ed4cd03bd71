use super::*;

fn ok(body: &str) -> QueryResponse {
    parse_response(body.as_bytes()).unwrap_or_else(|e| panic!("{e} for {body}"))
}

fn err(body: &str) -> PrometheusError {
    match parse_response(body.as_bytes()) {
        Ok(r) => panic!("parsed {r:?} from {body}"),
        Err(e) => e,
    }
}

fn vector(r: &QueryResponse) -> &[Series] {
    match &r.data {
        QueryData::Vector(v) => v,
        other => panic!("not a vector: {other:?}"),
    }
}

#[test]
fn vector_with_labels_warnings_and_infos() {
    let r = ok(
        r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"__name__":"up","job":"api","instance":"10.0.0.1:80"},"value":[1712345678.123,"1.5"]},
        {"metric":{},"value":[1712345678,"2"]}]},
        "warnings":["partial: store down","second"],"infos":["ignored"]}"#,
    );
    let v = vector(&r);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].labels.get("job"), Some("api"));
    assert_eq!(v[0].labels.get("__name__"), Some("up"));
    assert_eq!(v[0].labels.len(), 3);
    assert_eq!(
        v[0].sample,
        Sample {
            timestamp: 1712345678.123,
            value: 1.5
        }
    );
    assert!(v[1].labels.is_empty());
    assert_eq!(v[1].sample.timestamp, 1712345678.0);
    assert_eq!(r.warnings, vec!["partial: store down", "second"]);
    assert_eq!(r.infos, vec!["ignored"]);
}

/// The info annotation of Prometheus v2.50–v2.54 `util/annotations/annotations.go`
/// (`NewPossibleNonCounterInfo`, position appended by `annoErr.Error`).
const NON_COUNTER_INFO: &str = r#"PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"errors\" (1:6)"#;

#[test]
fn prometheus_2_54_infos_are_not_warnings() {
    // web/api/v1/api.go v2.54.0: `Infos []string json:"infos,omitempty"` next to `warnings`.
    let r = ok(&format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1,"0.5"]}}]}},"infos":["{NON_COUNTER_INFO}"]}}"#
    ));
    assert!(r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.infos.len(), 1);
    assert!(r.infos[0].starts_with("PromQL info: metric might not be a counter"));
    assert!(r.infos[0].ends_with("\"errors\" (1:6)"), "{:?}", r.infos);
}

#[test]
fn prometheus_2_50_to_2_53_infos_in_warnings_are_moved_to_infos() {
    // v2.50.0–v2.53.x `AsStrings(query, 10)` returns warnings and infos in one list, in
    // `warnings`; a real warning stays a warning, so does the "omitted" note (it may hide one).
    let warning = "PromQL warning: quantile value should be between 0 and 1, got 2 (1:20)";
    let r = ok(&format!(
        r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"1"]}},"warnings":["{NON_COUNTER_INFO}","{warning}","3 more annotations omitted"]}}"#
    ));
    assert_eq!(r.warnings, vec![warning, "3 more annotations omitted"]);
    assert_eq!(r.infos.len(), 1);
    assert!(r.infos[0].starts_with("PromQL info: "), "{:?}", r.infos);
    // Infos only: no warning left.
    let r = ok(&format!(
        r#"{{"status":"success","warnings":["{NON_COUNTER_INFO}"],"infos":null,"data":{{"resultType":"vector","result":[]}}}}"#
    ));
    assert!(r.warnings.is_empty(), "{r:?}");
    assert_eq!(r.infos.len(), 1);
}

#[test]
fn victoria_metrics_partial_answers_are_errors() {
    // app/vmselect/prometheus/query_response.qtpl and query_range_response.qtpl, v1.79.5-cluster:
    // `"status":"success","isPartial":true` before `data`, no warnings.
    for body in [
        r#"{"status":"success","isPartial":true,"data":{"resultType":"vector","result":[{"metric":{"cluster":"edge-001"},"value":[1700000000,"1"]}]}}"#,
        r#"{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[]},"isPartial":true}"#,
    ] {
        let e = err(body);
        assert!(matches!(e, PrometheusError::Partial { .. }), "{e:?}");
        assert_eq!(e.kind_label(), "partial");
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("isPartial: true"), "{e}");
    }
    // `isPartial: false` (every vmstorage answered) and newer versions' `stats` are a result.
    let r = ok(
        r#"{"status":"success","isPartial":false,"data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"2"]}]},"stats":{"seriesFetched":"1","executionTimeMsec":3}}"#,
    );
    assert_eq!(vector(&r)[0].sample.value, 2.0);
    // Anything but a boolean is not a VictoriaMetrics answer.
    assert!(matches!(
        err(r#"{"status":"success","isPartial":"yes","data":{"resultType":"vector","result":[]}}"#),
        PrometheusError::Malformed { .. }
    ));
}

#[test]
fn special_values() {
    let r = ok(
        r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"a":"1"},"value":[1,"NaN"]},
        {"metric":{"a":"2"},"value":[1,"+Inf"]},
        {"metric":{"a":"3"},"value":[1,"-Inf"]},
        {"metric":{"a":"4"},"value":[1,"Inf"]},
        {"metric":{"a":"5"},"value":[1,"-0"]},
        {"metric":{"a":"6"},"value":[1,"1e-3"]}]}}"#,
    );
    let values: Vec<f64> = vector(&r).iter().map(|s| s.sample.value).collect();
    assert!(values[0].is_nan());
    assert_eq!(values[1], f64::INFINITY);
    assert_eq!(values[2], f64::NEG_INFINITY);
    assert_eq!(values[3], f64::INFINITY);
    assert!(values[4] == 0.0 && values[4].is_sign_negative());
    assert_eq!(values[5], 0.001);
}

#[test]
fn scalar() {
    let r =
        ok(r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000.5,"0.25"]}}"#);
    assert_eq!(
        r.data,
        QueryData::Scalar(Sample {
            timestamp: 1700000000.5,
            value: 0.25
        })
    );
    assert!(r.warnings.is_empty());
}

#[test]
fn matrix_with_native_histograms_skipped() {
    let r = ok(
        r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"job":"a"},"values":[[1,"1"],[2,"NaN"],[3,"3"]]},
        {"metric":{"job":"b"},"histograms":[[1,{"count":"2","sum":"3","buckets":[[0,"0","1","2"]]}]]},
        {"metric":{"job":"c"},"values":[[1,"5"]],"histograms":[[2,{"count":"1","sum":"1"}]]}]}}"#,
    );
    let QueryData::Matrix(m) = r.data else {
        panic!("{:?}", r.data)
    };
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].labels.get("job"), Some("a"));
    assert_eq!(m[0].samples.len(), 3);
    assert!(m[0].samples[1].value.is_nan());
    assert_eq!(
        m[0].samples[2],
        Sample {
            timestamp: 3.0,
            value: 3.0
        }
    );
    assert_eq!(m[1].labels.get("job"), Some("c"));
    assert_eq!(
        m[1].samples,
        vec![Sample {
            timestamp: 1.0,
            value: 5.0
        }]
    );
}

#[test]
fn vector_histogram_only_series_is_left_out() {
    let r = ok(
        r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"job":"h"},"histogram":[1,{"count":"2","sum":"3"}]},
        {"metric":{"job":"f"},"value":[1,"7"]}]}}"#,
    );
    let v = vector(&r);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].labels.get("job"), Some("f"));
}

#[test]
fn result_type_after_result() {
    let r = ok(
        r#"{"data":{"result":[{"value":[1,"3"],"metric":{"z":"1","a":"2"}}],"resultType":"vector"},"status":"success"}"#,
    );
    let v = vector(&r);
    assert_eq!(
        v[0].labels.iter().collect::<Vec<_>>(),
        vec![("a", "2"), ("z", "1")]
    );
    assert_eq!(v[0].sample.value, 3.0);
    let r = ok(r#"{"data":{"result":[5,"6"],"resultType":"scalar"},"status":"success"}"#);
    assert_eq!(
        r.data,
        QueryData::Scalar(Sample {
            timestamp: 5.0,
            value: 6.0
        })
    );
}

#[test]
fn empty_and_null_results() {
    let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#);
    assert!(vector(&r).is_empty());
    let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":null}}"#);
    assert!(vector(&r).is_empty());
    let r =
        ok(r#"{"status":"success","data":{"resultType":"matrix","result":[]},"warnings":null}"#);
    assert_eq!(r.data, QueryData::Matrix(Vec::new()));
}

#[test]
fn string_and_unknown_result_types_are_rejected() {
    for body in [
        r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#,
        r#"{"status":"success","data":{"result":[1,"hello"],"resultType":"string"}}"#,
        r#"{"status":"success","data":{"resultType":"streams","result":{"weird":true}}}"#,
    ] {
        match err(body) {
            PrometheusError::UnsupportedResultType { result_type, .. } => {
                assert!(result_type == "string" || result_type == "streams")
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn api_error_body() {
    let e =
        err(r#"{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected"}"#);
    match &e {
        PrometheusError::Api {
            error_type,
            message,
            ..
        } => {
            assert_eq!(error_type, "bad_data");
            assert_eq!(message, "1:5: parse error: unexpected");
        }
        other => panic!("{other:?}"),
    }
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("bad_data"), "{e}");
}

#[test]
fn non_2xx_bodies() {
    let o = Origin::address("http://h:1");
    let e = decode(
        &o,
        503,
        br#"{"status":"error","errorType":"unavailable","error":"too many queries"}"#,
    )
    .unwrap_err();
    assert!(
        matches!(&e, PrometheusError::Api { status: 503, error_type, .. } if error_type == "unavailable")
    );
    assert!(e.is_retryable());
    let e = decode(
        &o,
        500,
        b"<html>\n<body>Internal\tServer Error</body></html>",
    )
    .unwrap_err();
    match &e {
        PrometheusError::Http {
            status: 500,
            excerpt,
            ..
        } => {
            assert_eq!(excerpt, "<html> <body>Internal Server Error</body></html>")
        }
        other => panic!("{other:?}"),
    }
    let long = "x".repeat(5000);
    let e = decode(&o, 502, long.as_bytes()).unwrap_err();
    assert!(e.to_string().len() < 300, "{e}");
    let e = decode(&o, 404, b"").unwrap_err();
    assert!(e.to_string().contains("HTTP 404: (empty body)"), "{e}");
}

#[test]
fn malformed_bodies() {
    for body in [
        "",
        "not json",
        "[]",
        "{",
        r#"{"status":"success"}"#,
        r#"{"data":{"resultType":"vector","result":[]}}"#,
        r#"{"status":"maybe","data":{"resultType":"vector","result":[]}}"#,
        r#"{"status":"success","data":{"result":[]}}"#,
        r#"{"status":"success","data":{"resultType":"vector"}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1","2"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"values":[[1,"1"]]}]}}"#,
        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"value":[1,"1"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"scalar","result":[{"metric":{},"value":[1,"1"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[1,"1"]}}"#,
        r#"{"status":"success","data":{"resultType":"scalar","result":[1,"abc"]}}"#,
        r#"{"status":"success","data":{"resultType":"scalar","result":[1]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[]}} trailing"#,
        r#"{"status":"success","data":{"resultType":"vector","result":"x"}}"#,
    ] {
        match parse_response(body.as_bytes()) {
            Err(PrometheusError::Malformed { .. }) => {}
            other => panic!("{body}: {other:?}"),
        }
    }
    match parse_response(b"\xff\xfe{\"status\":\x00") {
        Err(PrometheusError::Malformed { .. }) => {}
        other => panic!("{other:?}"),
    }
}

/// Every strict prefix of a valid body is an error, never a panic or a partial result.
#[test]
fn truncated_bodies_are_errors() {
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b\"c"},"values":[[1.5,"NaN"],[2,"+Inf"]]}]},"warnings":["w"]}"#;
    assert!(parse_response(body.as_bytes()).is_ok());
    for end in 0..body.len() {
        let res = parse_response(&body.as_bytes()[..end]);
        assert!(res.is_err(), "prefix of {end} bytes parsed: {res:?}");
    }
}

/// Single-byte corruptions never panic; whatever parses agrees with a generic JSON decoder.
#[test]
fn corrupted_bodies_never_panic() {
    let body = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"a","x":"y"},"value":[17,"2.5"]}]}}"#;
    for i in 0..body.len() {
        for b in [b'"', b'{', b']', b',', b'0', 0xff, b'\\'] {
            let mut copy = body.to_vec();
            copy[i] = b;
            if let Ok(r) = parse_response(&copy) {
                let v: serde_json::Value = serde_json::from_slice(&copy).unwrap();
                let n = v["data"]["result"].as_array().map(|a| a.len());
                if let QueryData::Vector(s) = &r.data {
                    assert_eq!(Some(s.len()), n);
                }
            }
        }
    }
}

/// Cross-check against serde_json::Value on a generated response with escapes and unicode.
#[test]
fn agrees_with_generic_json() {
    let mut result = Vec::new();
    for i in 0..300u32 {
        let mut metric = serde_json::Map::new();
        for j in 0..(i % 7) {
            metric.insert(
                format!("l{}", (j * 7 + i) % 11),
                serde_json::Value::String(format!("v\"{i}\\{j}\u{e9}\n")),
            );
        }
        let value = match i % 5 {
            0 => "NaN".to_string(),
            1 => "-Inf".to_string(),
            _ => format!("{}", f64::from(i) * 0.37 - 20.0),
        };
        result.push(
            serde_json::json!({"metric": metric, "value": [1.7e9 + f64::from(i) / 1000.0, value]}),
        );
    }
    let doc =
        serde_json::json!({"status":"success","data":{"resultType":"vector","result":result}});
    let body = serde_json::to_vec(&doc).unwrap();
    let r = parse_response(&body).unwrap();
    let v = vector(&r);
    assert_eq!(v.len(), 300);
    for (series, expected) in v.iter().zip(doc["data"]["result"].as_array().unwrap()) {
        let metric = expected["metric"].as_object().unwrap();
        assert_eq!(series.labels.len(), metric.len());
        for (k, val) in metric {
            assert_eq!(series.labels.get(k), val.as_str());
        }
        let names: Vec<&str> = series.labels.iter().map(|(n, _)| n).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        let want: f64 = expected["value"][1].as_str().unwrap().parse().unwrap();
        assert!(series.sample.value == want || (want.is_nan() && series.sample.value.is_nan()));
        assert_eq!(
            series.sample.timestamp,
            expected["value"][0].as_f64().unwrap()
        );
    }
}

#[test]
fn duplicate_envelope_keys_are_malformed() {
    let vector = r#"{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}"#;
    for (body, key) in [
        (
            format!(r#"{{"status":"error","errorType":"x","error":"y","data":{vector},"status":"success"}}"#),
            "status",
        ),
        (
            format!(r#"{{"status":"success","status":"error","data":{vector}}}"#),
            "status",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"data":{{"resultType":"vector","result":[]}}}}"#),
            "data",
        ),
        (
            r#"{"status":"success","data":{"resultType":"string","resultType":"vector","result":[]}}"#.to_string(),
            "resultType",
        ),
        (
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"9"]}],"result":[]}}"#.to_string(),
            "result",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"isPartial":true,"isPartial":false}}"#),
            "isPartial",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"warnings":["data missing"],"warnings":[]}}"#),
            "warnings",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"infos":[],"infos":[]}}"#),
            "infos",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"error":"a","error":"b"}}"#),
            "error",
        ),
        (
            format!(r#"{{"status":"success","data":{vector},"errorType":"a","errorType":"b"}}"#),
            "errorType",
        ),
    ] {
        match err(&body) {
            PrometheusError::Malformed { detail, .. } => {
                assert!(detail.contains(&format!("duplicate key `{key}`")), "{detail} for {body}")
            }
            other => panic!("{other:?} for {body}"),
        }
    }
    // Keys rollgate does not read may repeat (they are skipped either way).
    ok(&format!(
        r#"{{"status":"success","data":{vector},"stats":{{}},"stats":{{}}}}"#
    ));
    // A non-2xx answer whose error object repeats a key is not read as that object.
    let e = super::decode(
        &Origin::unknown(),
        400,
        br#"{"status":"error","status":"success","errorType":"bad_data","error":"x"}"#,
    )
    .unwrap_err();
    assert!(
        matches!(e, PrometheusError::Http { status: 400, .. }),
        "{e:?}"
    );
}
