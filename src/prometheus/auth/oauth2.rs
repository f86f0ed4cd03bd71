//! The OAuth2 client credentials grant (RFC 6749 section 4.4): the client authenticates with
//! HTTP Basic (section 2.3.1: id and secret form-encoded first; every authorization server must
//! accept it — Microsoft's identity platform does too) and asks for a token with
//! `grant_type=client_credentials`, its scopes space-separated (section 3.3) and the extra
//! endpoint parameters. With a client assertion instead of a secret (Azure workload identity's
//! federated token), the client authenticates with `client_id`, `client_assertion_type`
//! (`urn:ietf:params:oauth:client-assertion-type:jwt-bearer`) and `client_assertion` in the
//! form (RFC 7523 section 2.2; Microsoft identity platform, "client credentials flow",
//! "second case: access token request with a federated credential").

use std::time::Duration;

use base64::Engine as _;

use super::token_cache::Token;
use super::{read_secret, send, shown, token_answer};
use crate::prometheus::config::OAuth2Config;
use crate::prometheus::error::PrometheusError;
use crate::prometheus::scrub::Scrubber;

/// A new token from `cfg`'s token endpoint.
pub(super) async fn fetch(cfg: &OAuth2Config, timeout: Duration) -> Result<Token, PrometheusError> {
    let what = format!("OAuth2 token endpoint {}", shown(&cfg.token_url));
    let mut secrets = Scrubber::default();
    let (credentials, assertion) = match (&cfg.client_assertion_file, &cfg.client_secret_file) {
        (Some(path), _) => {
            let assertion = read_secret("oauth2.clientAssertionFile", path).await?;
            secrets.secret(&assertion);
            (None, Some(assertion))
        }
        (None, Some(path)) => {
            let secret = read_secret("oauth2.clientSecretFile", path).await?;
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(&cfg.client_id),
                encode(&secret)
            ));
            secrets.secret(&secret);
            secrets.secret(&credentials);
            (Some(credentials), None)
        }
        (None, None) => {
            return Err(PrometheusError::Auth(
                "oauth2: neither clientSecretFile nor clientAssertionFile is set".into(),
            ))
        }
    };
    // Finished before any await: the serializer is not `Send`.
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(assertion) = &assertion {
            form.append_pair("client_id", &cfg.client_id);
            form.append_pair(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            );
            form.append_pair("client_assertion", assertion);
        }
        if !cfg.scopes.is_empty() {
            form.append_pair("scope", &cfg.scopes.join(" "));
        }
        for (name, value) in &cfg.endpoint_params {
            form.append_pair(name, value);
        }
        form.finish()
    };
    let client = super::http_client(false)?;
    let mut request = client
        .post(&cfg.token_url)
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form);
    if let Some(credentials) = credentials {
        let mut authorization = http::HeaderValue::try_from(format!("Basic {credentials}"))
            .map_err(|_| {
                PrometheusError::Auth(
                    "oauth2: the client credentials do not fit in a header".into(),
                )
            })?;
        authorization.set_sensitive(true);
        request = request.header(http::header::AUTHORIZATION, authorization);
    }
    let (status, body) = send(&what, request, timeout).await?;
    token_answer(&what, status, &body, &secrets)
}
