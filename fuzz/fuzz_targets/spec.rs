//! The rollgate metric spec as JSON and as YAML. Invariants: an accepted spec validates the
//! same again; a spec accepted from YAML is accepted the same from its JSON rendering (so the
//! two readers agree); a rejection is an error naming a key path, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollgate::spec::{parse_request_yaml, MetricSpec};

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    if let Ok(spec) = MetricSpec::from_json_bytes(data) {
        let again = MetricSpec::from_json_bytes(data).expect("an accepted spec re-validates");
        assert_eq!(spec, again);
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = parse_request_yaml(text) else {
        return;
    };
    if let Ok(spec) = MetricSpec::from_value(&value, "spec") {
        let json = serde_json::to_vec(&value).expect("a JSON value serializes");
        let from_json =
            MetricSpec::from_json_bytes(&json).expect("the JSON rendering of an accepted spec");
        assert_eq!(spec, from_json, "YAML and JSON readers disagree");
    }
});
