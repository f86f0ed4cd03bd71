//! `rollgate serve` request bodies: Flagger's webhook payload and Argo's web-provider body,
//! read and planned (inline specs allowed, no templates loaded) as the handlers do.
//! Invariants: no panic; a refusal is a 4xx with a non-empty message; reading is
//! deterministic; a body that reads is planned or refused with a 4xx, never a 5xx.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollgate::serve::analysis::plan;
use rollgate::serve::flagger::{parse_payload, selection};
use rollgate::serve::templates::TemplateSet;
use rollgate::serve::web_provider::parse_request;

fn check_refusal(what: &str, status: u16, message: &str) {
    assert!(
        (400..500).contains(&status),
        "{what}: refused with {status}: {message}"
    );
    assert!(
        !message.trim().is_empty(),
        "{what}: refused with an empty message"
    );
}

fuzz_target!(|data: &[u8]| {
    fuzz_support::caught_panics_are_not_crashes();
    let templates = TemplateSet::default();
    match parse_request(data) {
        Ok((sel, args)) => {
            let again = parse_request(data).expect("a body that reads re-reads");
            assert_eq!(format!("{:?}", (&sel, &args)), format!("{again:?}"));
            if let Err(r) = plan(
                &templates,
                &sel,
                &args,
                &rollgate::engine::Trust::network(true),
            ) {
                check_refusal("web plan", r.status.as_u16(), &r.message);
            }
        }
        Err(r) => check_refusal("web body", r.status.as_u16(), &r.message),
    }
    match parse_payload(data) {
        Ok(payload) => match selection(&payload) {
            Ok((sel, args)) => {
                if let Err(r) = plan(
                    &templates,
                    &sel,
                    &args,
                    &rollgate::engine::Trust::network(true),
                ) {
                    check_refusal("flagger plan", r.status.as_u16(), &r.message);
                }
            }
            Err(r) => check_refusal("flagger selection", r.status.as_u16(), &r.message),
        },
        Err(r) => check_refusal("flagger body", r.status.as_u16(), &r.message),
    }
});
