//! `matches`: Go's RE2 syntax through the `regex` crate, which shares RE2's syntax and its
//! linear-time guarantee, so a hostile pattern cannot stall an analysis worker.

/// The compiled-program size one pattern may use; larger patterns are errors, not memory.
const SIZE_LIMIT: usize = 1 << 20;

/// A compiled pattern; `is_match` searches anywhere in the text, like Go's `MatchString`.
#[derive(Debug, Clone)]
pub(crate) struct Regex(regex::Regex);

impl Regex {
    /// Compiles `pattern`; the error says what is wrong with it.
    pub(crate) fn new(pattern: &str) -> Result<Regex, String> {
        regex::RegexBuilder::new(pattern)
            .size_limit(SIZE_LIMIT)
            .build()
            .map(Regex)
            .map_err(|e| match e {
                regex::Error::Syntax(text) => text
                    .lines()
                    .last()
                    .unwrap_or("invalid pattern")
                    .trim()
                    .to_string(),
                regex::Error::CompiledTooBig(_) => "pattern too large".to_string(),
                other => other.to_string(),
            })
    }

    /// True when the pattern matches anywhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, text: &str) -> bool {
        Regex::new(pattern).unwrap().is_match(text)
    }

    #[test]
    fn searches_anywhere_with_re2_syntax() {
        assert!(m("abc", "xxabcxx"));
        assert!(m("^ab", "abc"));
        assert!(!m("^bc", "abc"));
        assert!(m(r"^\d+$", "12345"));
        assert!(m("(?i)^hello$", "HeLLo"));
        assert!(m(r"\bfoo\b", "a foo b"));
    }

    #[test]
    fn invalid_and_huge_patterns_are_errors() {
        for p in ["(", "[a", "[z-a]", r"\", "a{3,2}", "(?<!x)y"] {
            assert!(Regex::new(p).is_err(), "{p}");
        }
        assert_eq!(
            Regex::new("a{1000}{1000}").unwrap_err(),
            "pattern too large"
        );
    }

    #[test]
    fn pathological_patterns_run_in_linear_time() {
        let text = format!("{}b", "a".repeat(50_000));
        assert!(!m("^(a+)+$", &text));
    }
}
