//! Google access tokens, from a service-account key or from the metadata server.
//!
//! - Key file: a JWT signed RS256 with the key's private key, claims `iss` (the account's
//!   email), `scope`, `aud` (the key's `token_uri`), `iat` and `exp` (an hour later), exchanged
//!   at `token_uri` with `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and
//!   `assertion` (RFC 7523 section 2.1; Google's "Using OAuth 2.0 for Server to Server
//!   Applications", which names these claims and that one-hour limit).
//! - Metadata server (GKE Workload Identity, Compute Engine): `GET
//!   /computeMetadata/v1/instance/service-accounts/default/token` with `Metadata-Flavor:
//!   Google`; it answers the same token JSON.

use std::time::Duration;

use base64::Engine as _;
use serde_json::json;

use super::token_cache::Token;
use super::{send, shown, token_answer};
use crate::prometheus::config::GoogleAuthConfig;
use crate::prometheus::error::PrometheusError;
use crate::prometheus::scrub::Scrubber;

/// The scope asked for when the spec names none: reading metrics is all a check does.
pub(crate) const DEFAULT_SCOPE: &str = "https://www.googleapis.com/auth/monitoring.read";
/// Where the metadata server is when neither the spec nor `GCE_METADATA_HOST` says.
const METADATA_HOST: &str = "metadata.google.internal";
/// The token path of the metadata server.
const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// A signed assertion's lifetime: Google accepts at most an hour.
const ASSERTION_LIFETIME: i64 = 3600;

/// A new access token for `cfg`.
pub(super) async fn fetch(
    cfg: &GoogleAuthConfig,
    timeout: Duration,
) -> Result<Token, PrometheusError> {
    match &cfg.credentials_file {
        Some(path) => from_key(cfg, path, timeout).await,
        None => from_metadata(cfg, timeout).await,
    }
}

/// The part of a service-account key file rollgate uses.
#[derive(serde::Deserialize)]
struct ServiceAccountKey {
    #[serde(rename = "type")]
    kind: String,
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
}

async fn from_key(
    cfg: &GoogleAuthConfig,
    path: &std::path::Path,
    timeout: Duration,
) -> Result<Token, PrometheusError> {
    let key_error = |why: &str| {
        PrometheusError::Auth(format!("google.credentialsFile {}: {why}", path.display()))
    };
    let text = super::read_secret("google.credentialsFile", path).await?;
    // serde's message could quote the file's content (the private key): not shown.
    let key: ServiceAccountKey =
        serde_json::from_str(&text).map_err(|_| key_error("not a service-account JSON key"))?;
    if key.kind != "service_account" {
        return Err(key_error(&format!(
            "a key of type {:?}; only service_account keys are supported",
            key.kind.chars().take(40).collect::<String>()
        )));
    }
    let (Some(email), Some(pem), Some(token_uri)) =
        (key.client_email, key.private_key, key.token_uri)
    else {
        return Err(key_error(
            "client_email, private_key and token_uri are all needed",
        ));
    };
    if !(token_uri.starts_with("https://") || token_uri.starts_with("http://")) {
        return Err(key_error("token_uri is not an http(s) URL"));
    }
    let assertion = sign_assertion(
        &email,
        key.private_key_id.as_deref(),
        &pem,
        &token_uri,
        &cfg.scopes,
    )
    .map_err(|why| key_error(&why))?;
    let what = format!("Google token endpoint {}", shown(&token_uri));
    // Finished before any await: the serializer is not `Send`.
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
        form.append_pair("assertion", &assertion);
        form.finish()
    };
    let mut secrets = Scrubber::default();
    secrets.secret(&assertion);
    let request = super::http_client(false)?
        .post(&token_uri)
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form);
    let (status, body) = send(&what, request, timeout).await?;
    token_answer(&what, status, &body, &secrets)
}

/// The signed JWT (RS256) asserting `email`'s identity to `audience` for `scopes`.
fn sign_assertion(
    email: &str,
    key_id: Option<&str>,
    pem: &str,
    audience: &str,
    scopes: &[String],
) -> Result<String, String> {
    use rustls_pki_types::pem::PemObject as _;
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|_| "private_key is not a PEM PKCS#8 private key".to_string())?;
    let pair = ring::signature::RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
        .map_err(|e| format!("private_key is not a usable RSA key ({e})"))?;
    let now = chrono::Utc::now().timestamp();
    let scope = if scopes.is_empty() {
        super::google::DEFAULT_SCOPE.to_string()
    } else {
        scopes.join(" ")
    };
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = key_id {
        header["kid"] = json!(kid);
    }
    let claims = json!({
        "iss": email,
        "scope": scope,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME,
    });
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
    };
    let signing_input = format!("{}.{}", b64(&header), b64(&claims));
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "signing with private_key failed".to_string())?;
    Ok(format!(
        "{signing_input}.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// The metadata server's base URL: the spec's `metadataAddress`, else `GCE_METADATA_HOST` (the
/// variable Google's client libraries read), else `metadata.google.internal`.
fn metadata_base(cfg: &GoogleAuthConfig) -> String {
    let host = cfg
        .metadata_address
        .clone()
        .or_else(|| {
            std::env::var("GCE_METADATA_HOST")
                .ok()
                .filter(|h| !h.trim().is_empty())
        })
        .unwrap_or_else(|| METADATA_HOST.to_string());
    let host = host.trim().trim_end_matches('/');
    if host.contains("://") {
        host.to_string()
    } else {
        format!("http://{host}")
    }
}

async fn from_metadata(
    cfg: &GoogleAuthConfig,
    timeout: Duration,
) -> Result<Token, PrometheusError> {
    let base = metadata_base(cfg);
    let mut url = format!("{base}{METADATA_TOKEN_PATH}");
    if !cfg.scopes.is_empty() {
        let scopes = cfg.scopes.join(",");
        let scopes: String = url::form_urlencoded::byte_serialize(scopes.as_bytes()).collect();
        url.push_str(&format!("?scopes={scopes}"));
    }
    let what = format!("Google metadata server {}", shown(&base));
    let request = super::http_client(true)?
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .header(http::header::ACCEPT, "application/json");
    let (status, body) = send(&what, request, timeout).await?;
    token_answer(&what, status, &body, &Scrubber::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_address_from_the_spec_else_the_default() {
        let mut cfg = GoogleAuthConfig {
            credentials_file: None,
            scopes: Vec::new(),
            metadata_address: Some("127.0.0.1:8080".into()),
        };
        assert_eq!(metadata_base(&cfg), "http://127.0.0.1:8080");
        cfg.metadata_address = Some("http://h:1/".into());
        assert_eq!(metadata_base(&cfg), "http://h:1");
    }

    #[test]
    fn a_key_that_is_not_pkcs8_rsa_is_refused_without_showing_it() {
        let e = sign_assertion(
            "a@b",
            None,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            "http://t",
            &[],
        )
        .unwrap_err();
        assert!(e.contains("RSA") || e.contains("PKCS#8"), "{e}");
        assert!(!e.contains("AAAA"), "{e}");
        let e = sign_assertion("a@b", None, "junk", "http://t", &[]).unwrap_err();
        assert!(e.contains("PKCS#8"), "{e}");
    }
}
