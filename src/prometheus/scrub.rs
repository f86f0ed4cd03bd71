//! The one scrubber for text that comes back from a Prometheus-compatible API.
//!
//! rollgate sends credentials with every query (a bearer token, basic auth from a password
//! file or from the address's userinfo, sensitive headers, SigV4's session token). A server or proxy may echo them
//! back — in an error body, a `warnings` entry, even a label value — and whatever the
//! upstream says can end up in a message, a measurement's metadata, a log line or an answer
//! to a caller who must never see the operator's credentials. So every credential form the
//! query carried is replaced by `<redacted>` in every text decoded from the answer, before
//! the answer leaves the client.
//!
//! Forms scrubbed, for each secret: the raw value, its base64 (standard and URL-safe, with and
//! without padding), its percent-encoding (upper- and lower-case hex, `%20` and `+` for a
//! space) and its JSON-escaped form. Secrets: a bearer token; a basic-auth password and the
//! `user:password` pair (whose base64 is the `Authorization: Basic` value); the same for the
//! address's userinfo; every access token an `oauth2:` or `google:` block obtained (the
//! current one and the few before it); the value of every sensitive header (see `is_sensitive_header`) and,
//! for an `Authorization`-style value `Scheme credential`, the credential alone (and, for
//! `Basic`, what it decodes to). User names alone are not secrets and are left as they are.

use base64::Engine as _;

use super::error::PrometheusError;
use super::response::{QueryData, QueryResponse};
use super::Labels;

/// What replaces a credential.
const REDACTED: &str = "<redacted>";
/// Encoded forms of shorter secrets are not scrubbed: two or three base64 characters occur by
/// chance in ordinary text (the raw secret is still scrubbed, however short).
const MIN_ENCODED: usize = 4;

/// Every form of the credentials one query carried.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scrubber {
    /// Longest first, so a form that contains another is replaced whole.
    forms: Vec<String>,
}

impl Scrubber {
    /// Whether there is nothing to scrub (the query carried no credential).
    pub(crate) fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// A secret value (token, password, header value) in all its forms.
    pub(crate) fn secret(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        self.push(secret.to_string());
        let bytes = secret.as_bytes();
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            self.push_encoded(engine.encode(bytes));
        }
        self.push_encoded(percent_encode(bytes, false, true));
        self.push_encoded(percent_encode(bytes, false, false));
        self.push_encoded(percent_encode(bytes, true, true));
        if let Ok(json) = serde_json::to_string(secret) {
            let inner = json
                .strip_prefix('"')
                .and_then(|j| j.strip_suffix('"'))
                .unwrap_or(&json);
            self.push_encoded(inner.to_string());
        }
        self.forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    }

    /// Basic auth: the password, and the `user:password` pair the header encodes.
    pub(crate) fn basic(&mut self, user: &str, password: &str) {
        self.secret(password);
        self.secret(&format!("{user}:{password}"));
    }

    /// A sensitive header's value: the whole value, and for `Scheme credential` the
    /// credential (for `Basic`, also what it decodes to).
    pub(crate) fn header(&mut self, value: &str) {
        self.secret(value.trim());
        let Some((scheme, credential)) = value.trim().split_once(' ') else {
            return;
        };
        let credential = credential.trim();
        self.secret(credential);
        if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(credential)
                .ok()
                .and_then(|d| String::from_utf8(d).ok());
            if let Some(pair) = decoded {
                match pair.split_once(':') {
                    Some((user, password)) => self.basic(user, password),
                    None => self.secret(&pair),
                }
            }
        }
    }

    fn push(&mut self, form: String) {
        if !form.is_empty() && !self.forms.contains(&form) {
            self.forms.push(form);
        }
    }

    fn push_encoded(&mut self, form: String) {
        if form.len() >= MIN_ENCODED {
            self.push(form);
        }
    }

    /// `text` with every form replaced.
    pub(crate) fn clean(&self, text: String) -> String {
        let mut text = text;
        for form in &self.forms {
            if text.contains(form.as_str()) {
                text = text.replace(form.as_str(), REDACTED);
            }
        }
        text
    }

    fn dirty(&self, text: &str) -> bool {
        self.forms.iter().any(|f| text.contains(f.as_str()))
    }

    /// The free-text parts of an error, scrubbed.
    pub(crate) fn error(&self, err: PrometheusError) -> PrometheusError {
        if self.is_empty() {
            return err;
        }
        let clean = |text: String| self.clean(text);
        match err {
            PrometheusError::Connect { origin, detail } => PrometheusError::Connect {
                origin,
                detail: clean(detail),
            },
            PrometheusError::Http {
                origin,
                status,
                excerpt,
            } => PrometheusError::Http {
                origin,
                status,
                excerpt: clean(excerpt),
            },
            PrometheusError::Api {
                origin,
                status,
                error_type,
                message,
            } => PrometheusError::Api {
                origin,
                status,
                error_type: clean(error_type),
                message: clean(message),
            },
            PrometheusError::Malformed { origin, detail } => PrometheusError::Malformed {
                origin,
                detail: clean(detail),
            },
            PrometheusError::UnsupportedResultType {
                origin,
                result_type,
            } => PrometheusError::UnsupportedResultType {
                origin,
                result_type: clean(result_type),
            },
            PrometheusError::Auth(detail) => PrometheusError::Auth(clean(detail)),
            other => other,
        }
    }

    /// Every text of a decoded answer, scrubbed: warnings, infos and, when the body could
    /// hold a credential (`body_may_hold`), label names and values.
    pub(crate) fn response(&self, mut response: QueryResponse, body: &[u8]) -> QueryResponse {
        if self.is_empty() {
            return response;
        }
        for text in response
            .warnings
            .iter_mut()
            .chain(response.infos.iter_mut())
        {
            if self.dirty(text) {
                *text = self.clean(std::mem::take(text));
            }
        }
        if self.body_may_hold(body) {
            match &mut response.data {
                QueryData::Scalar(_) => {}
                QueryData::Vector(series) => {
                    for s in series {
                        self.labels(&mut s.labels);
                    }
                }
                QueryData::Matrix(series) => {
                    for s in series {
                        self.labels(&mut s.labels);
                    }
                }
            }
        }
        response
    }

    /// Whether a decoded text of `body` could hold a credential form: one appears in it as
    /// sent, or the body has JSON escapes that could spell one (a fleet answer of 200k
    /// series is not searched label by label when neither is the case).
    fn body_may_hold(&self, body: &[u8]) -> bool {
        body.contains(&b'\\')
            || self
                .forms
                .iter()
                .any(|f| body.windows(f.len()).any(|w| w == f.as_bytes()))
    }

    fn labels(&self, labels: &mut Labels) {
        if !labels.iter().any(|(n, v)| self.dirty(n) || self.dirty(v)) {
            return;
        }
        *labels = labels
            .iter()
            .map(|(n, v)| (self.clean(n.to_string()), self.clean(v.to_string())))
            .collect();
    }
}

/// Percent-encoding of every byte outside RFC 3986's unreserved set; `plus` writes a space as
/// `+` (form encoding), `upper` picks the hex digits' case.
fn percent_encode(bytes: &[u8], plus: bool, upper: bool) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else if plus && b == b' ' {
            out.push('+');
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prometheus::parse_response;

    #[test]
    fn every_form_of_a_secret_is_scrubbed() {
        let mut s = Scrubber::default();
        s.basic("alice", "p@ss w/rd\"x");
        let b64 = base64::engine::general_purpose::STANDARD.encode("alice:p@ss w/rd\"x");
        for text in [
            "p@ss w/rd\"x".to_string(),
            format!("Basic {b64}"),
            b64.trim_end_matches('=').to_string(),
            "p%40ss%20w%2Frd%22x".into(),
            "p%40ss+w%2Frd%22x".into(),
            "p%40ss%20w%2frd%22x".into(),
            "p@ss w/rd\\\"x".into(),
            base64::engine::general_purpose::URL_SAFE.encode("p@ss w/rd\"x"),
        ] {
            let cleaned = s.clean(format!("echo: [{text}] end"));
            assert!(cleaned.contains(REDACTED), "{text} -> {cleaned}");
            assert!(!cleaned.contains("ss w"), "{text} -> {cleaned}");
            assert!(!cleaned.contains(&b64[..8]), "{text} -> {cleaned}");
        }
        // The user name alone stays.
        assert_eq!(s.clean("user alice".into()), "user alice");
    }

    #[test]
    fn header_values_and_their_credentials() {
        let mut s = Scrubber::default();
        s.header("Bearer tok-123456");
        assert_eq!(s.clean("got tok-123456".into()), "got <redacted>");
        let mut s = Scrubber::default();
        let b64 = base64::engine::general_purpose::STANDARD.encode("bob:hunter22");
        s.header(&format!("Basic {b64}"));
        assert_eq!(s.clean("pw hunter22".into()), "pw <redacted>");
        assert_eq!(s.clean(format!("h {b64}")), "h <redacted>");
    }

    #[test]
    fn warnings_infos_and_labels_of_an_answer() {
        let mut s = Scrubber::default();
        s.secret("tok-123456");
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"auth":"Bearer tok-123456","job":"x"},"value":[1,"1"]},
            {"metric":{"esc":"\u0074ok-123456"},"value":[1,"1"]}]},
            "warnings":["saw Bearer tok-123456"],"infos":["PromQL info: dG9rLTEyMzQ1Ng=="]}"#;
        let r = s.response(parse_response(body).unwrap(), body);
        let shown = format!("{r:?}");
        assert!(!shown.contains("tok-123456"), "{shown}");
        assert!(!shown.contains("dG9rLTEyMzQ1Ng"), "{shown}");
        assert_eq!(r.warnings, ["saw Bearer <redacted>"]);
        assert!(shown.contains("job"), "{shown}");
    }
}
