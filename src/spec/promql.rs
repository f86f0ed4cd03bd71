//! PromQL is parsed before anything is sent, so a typo is a spec error, not a failed measurement.

use promql_parser::parser::Expr;

use super::error::{shorten, SpecError};

/// Longest query accepted, in bytes. Real queries are far shorter, long regex alternations
/// included; promql-parser takes time quadratic in some shapes (`1+1+...` of 16 KiB: ~0.3 s).
pub(crate) const MAX_QUERY_BYTES: usize = 16 * 1024;

/// Queries up to this length nest too shallowly to trouble any thread's stack.
const SHALLOW_QUERY_BYTES: usize = 1024;

/// Stack of the thread that parses longer queries. promql-parser builds and drops its tree
/// recursively, one frame per nesting level (`sum(sum(...`, `1+1+...`): about 20 kB of such a
/// query overflows a 2 MiB tokio worker, and a stack overflow aborts the whole process.
const PARSER_STACK_BYTES: usize = 16 << 20;

/// The language a metric's queries are written in: PromQL, or the query language of another
/// backend (named as in messages), which only that backend's server can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryLanguage {
    /// PromQL (a `prometheus` block, or none).
    Promql,
    /// Another backend's language (`datadog`, `influxdb`, …: the block's key).
    Other(&'static str),
}

/// Checks a query before anything is sent: PromQL is parsed; another backend's query must be
/// non-empty, within [`MAX_QUERY_BYTES`], with every `{{args.*}}` resolved and no run clock
/// (`[[run.*]]` fills in PromQL durations only).
pub(crate) fn check_query(
    path: &str,
    query: &str,
    language: QueryLanguage,
) -> Result<(), SpecError> {
    let QueryLanguage::Other(backend) = language else {
        return check_promql(path, query);
    };
    let invalid = |expected: String| SpecError::Invalid {
        path: path.to_string(),
        expected,
        got: format!("{:?}", shorten(query)),
    };
    if query.trim().is_empty() {
        return Err(invalid(format!("a {backend} query")));
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(invalid(format!(
            "a {backend} query of at most {MAX_QUERY_BYTES} bytes"
        )));
    }
    if query.contains("{{") {
        return Err(invalid(format!(
            "a {backend} query with every {{{{args.*}}}} placeholder resolved"
        )));
    }
    if super::run_clock::uses_run_clock(query) {
        return Err(invalid(format!(
            "a {backend} query without [[run.*]]: the run clock fills in PromQL durations, so it works with a prometheus block only"
        )));
    }
    crate::backends::check_query(backend, query)
        .map_err(|why| invalid(format!("a query the {backend} backend can run ({why})")))
}

/// Fails with the parser's reason when `query` is not valid PromQL.
pub fn check_promql(path: &str, query: &str) -> Result<(), SpecError> {
    parse_promql(path, query, |_| ())
}

/// Parses `query` and hands its tree to `read`, on a thread with a large stack when the query
/// is long; the tree is dropped there too, so only what `read` returns comes back.
pub(crate) fn parse_promql<T: Send>(
    path: &str,
    query: &str,
    read: impl FnOnce(Expr) -> T + Send,
) -> Result<T, SpecError> {
    let invalid = |expected: &str, got: String| SpecError::Invalid {
        path: path.to_string(),
        expected: expected.into(),
        got,
    };
    if query.contains("{{") {
        return Err(invalid(
            "a PromQL query with every {{args.*}} placeholder resolved",
            format!("{:?}", shorten(query)),
        ));
    }
    if query.len() > MAX_QUERY_BYTES {
        return Err(invalid(
            &format!("a PromQL query of at most {MAX_QUERY_BYTES} bytes"),
            format!("{} bytes", query.len()),
        ));
    }
    // The run clock is filled per call; it always stands for a duration.
    let query: &str = &super::run_clock::replace_run_clock(query, super::run_clock::PARSE_STAND_IN);
    let parse = || promql_parser::parser::parse(query).map(read);
    let parsed = if query.len() <= SHALLOW_QUERY_BYTES {
        // promql-parser panics on some inputs (a range like `[4444…445]` overflows a Duration;
        // found by fuzz/promql): a panic there is an invalid query, not a crash.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(parse))
            .unwrap_or_else(|_| Err("the PromQL parser panicked".into()))
    } else {
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("promql-parse".into())
                .stack_size(PARSER_STACK_BYTES)
                .spawn_scoped(scope, parse)
                .map_err(|e| format!("cannot start the parser thread: {e}"))
                .and_then(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|_| Err("the PromQL parser panicked".into()))
                })
        })
    };
    parsed.map_err(|reason| {
        invalid(
            "a valid PromQL query",
            format!("{:?} ({})", shorten(query), reason.trim()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/promql (fuzz/corpus/promql/regression-range-duration-overflow): the parser
    /// panicked on a range duration that overflows.
    #[test]
    fn a_parser_panic_is_an_invalid_query() {
        let q = "sum(rate(borate(boomla[5])) / -n(omla[4444444444444444444444444444444444444444444444444444444444444444444445])) / -n(job) ";
        let err = check_promql("query", q).unwrap_err().to_string();
        assert!(err.contains("query") && err.contains("panicked"), "{err}");
    }

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

    /// The deepest shapes at the size limit, checked on a thread with a tokio worker's 2 MiB
    /// stack: a verdict, never a stack overflow (which would abort this test binary).
    #[test]
    fn deeply_nested_queries_up_to_the_limit_do_not_overflow_a_worker_stack() {
        let n = MAX_QUERY_BYTES;
        let queries = [
            "(".repeat(n / 2 - 1) + "1" + &")".repeat(n / 2 - 1),
            "sum(".repeat(n / 5 - 1) + "up" + &")".repeat(n / 5 - 1),
            vec!["1"; n / 2].join("+"),
            vec!["1"; n / 2].join("^"),
            "-".repeat(n - 1) + "1",
        ];
        for q in queries {
            assert!(q.len() <= MAX_QUERY_BYTES);
            let checked = std::thread::Builder::new()
                .stack_size(2 << 20)
                .spawn(move || check_promql("query", &q).is_ok())
                .unwrap()
                .join();
            assert!(checked.is_ok());
        }
        let err = check_promql("query", &"(".repeat(n + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 16384 bytes"), "{err}");
    }
}
