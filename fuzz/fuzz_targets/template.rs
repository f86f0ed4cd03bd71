//! AnalysisTemplates (YAML, multi-document, with `{{args.*}}`): read, then expand the metrics
//! with an override. Invariants: reading and expanding are deterministic (the same input gives
//! the same templates and metrics, compared through Debug); no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollgate::spec::Template;

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(templates) = Template::parse_all(text, "fuzz.yaml") else {
        return;
    };
    let again = Template::parse_all(text, "fuzz.yaml").expect("an accepted file re-reads");
    assert_eq!(format!("{templates:?}"), format!("{again:?}"));
    let overrides = [("service".to_string(), "canary".to_string())];
    for t in &templates {
        let first = t.metrics(&overrides).map(|m| format!("{m:?}"));
        let second = t.metrics(&overrides).map(|m| format!("{m:?}"));
        assert_eq!(first.is_ok(), second.is_ok());
        if let (Ok(a), Ok(b)) = (first, second) {
            assert_eq!(a, b, "metric expansion is not deterministic");
        }
    }
});
