//! PromQL is parsed before anything is sent, so a typo is a spec error, not a failed measurement.

use super::error::SpecError;

/// Fails with the parser's reason when `query` is not valid PromQL.
pub fn check_promql(path: &str, query: &str) -> Result<(), SpecError> {
    if query.contains("{{") {
        return Err(SpecError::Invalid {
            path: path.to_string(),
            expected: "a PromQL query with every {{args.*}} placeholder resolved".into(),
            got: format!("{:?}", shorten(query)),
        });
    }
    promql_parser::parser::parse(query)
        .map(|_| ())
        .map_err(|reason| SpecError::Invalid {
            path: path.to_string(),
            expected: "a valid PromQL query".into(),
            got: format!("{:?} ({})", shorten(query), reason.trim()),
        })
}

fn shorten(q: &str) -> String {
    if q.chars().count() > 120 {
        let cut: String = q.chars().take(117).collect();
        format!("{cut}...")
    } else {
        q.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_typical_queries() {
        for q in [
            r#"sum(rate(http_requests_total{service="payments",code=~"5.."}[5m])) / sum(rate(http_requests_total{service="payments"}[5m]))"#,
            "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[1m])))",
            "vector(1)",
            "scalar(up)",
        ] {
            check_promql("query", q).unwrap();
        }
    }

    #[test]
    fn rejects_broken_queries_with_path() {
        let err = check_promql("minRequests.query", "sum(rate(x[5m])")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("minRequests.query: expected a valid PromQL query"),
            "{err}"
        );
        let err = check_promql("query", "rate(x[{{args.window}}])")
            .unwrap_err()
            .to_string();
        assert!(err.contains("placeholder"), "{err}");
    }
}
