//! YAML that arrives with a request (a Flagger webhook's inline `spec`), read with a bound on
//! the work it can cause. libyaml's scanner, under serde_yaml_ng, takes time quadratic in the
//! depth of nested flow collections: half a megabyte of `{a: {a: ...` holds a worker thread for
//! minutes before the parser's own recursion limit is reached. Capping the number of `[` and `{`
//! caps that depth whatever the quoting, in one pass over the text. Alias bombs are already
//! refused by serde_yaml_ng ("repetition limit exceeded").

use serde_json::Value;

/// Most `[` and `{` characters accepted in request YAML, inside strings or not. A metric spec
/// has a few dozen (PromQL selectors and ranges included); at the cap, parsing takes
/// milliseconds.
pub(crate) const MAX_BRACKETS: usize = 1024;

/// Why request YAML was not read.
#[derive(Debug, thiserror::Error)]
pub enum RequestYamlError {
    /// More nesting characters than a spec may have (the bound on the parser's work).
    #[error("{0} '[' or '{{' characters, more than the {MAX_BRACKETS} a spec may have")]
    TooManyBrackets(usize),
    /// Not YAML.
    #[error("not valid YAML: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// Parses YAML text from a request into a JSON value.
pub fn parse_request_yaml(text: &str) -> Result<Value, RequestYamlError> {
    let brackets = text.bytes().filter(|b| matches!(b, b'[' | b'{')).count();
    if brackets > MAX_BRACKETS {
        return Err(RequestYamlError::TooManyBrackets(brackets));
    }
    Ok(serde_yaml_ng::from_str(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn specs_parse_and_deep_flow_nesting_is_refused_quickly() {
        let spec =
            "query: sum(rate(x{a=\"b\"}[5m]))\nminRequests: {query: 'sum(y[5m])', count: 300}";
        assert_eq!(
            parse_request_yaml(spec).unwrap()["minRequests"]["count"],
            300
        );

        let deep = "{a: ".repeat(100_000) + "1" + &"}".repeat(100_000);
        let started = Instant::now();
        let err = parse_request_yaml(&deep).unwrap_err().to_string();
        assert!(err.contains("100000 '[' or '{'"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(1));

        // Within the cap, as deep as it can go: refused by the parser, without a long scan.
        let at_cap = "{a: ".repeat(MAX_BRACKETS) + "1" + &"}".repeat(MAX_BRACKETS);
        let started = Instant::now();
        assert!(parse_request_yaml(&at_cap)
            .unwrap_err()
            .to_string()
            .contains("recursion limit"));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(parse_request_yaml("a: [")
            .unwrap_err()
            .to_string()
            .starts_with("not valid YAML"));
    }
}
