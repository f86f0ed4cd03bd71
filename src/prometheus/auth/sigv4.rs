//! AWS Signature Version 4 on each request to Amazon Managed Service for Prometheus (or any
//! API behind SigV4), signed by the `aws-sigv4` crate with credentials from
//! [`super::aws_credentials`].
//!
//! Each attempt is signed again (a retry, the GET fallback): a signature covers the method,
//! the URL with its query, the headers and a hash of the body, and its date must be within
//! five minutes of AWS's clock.

use std::time::SystemTime;

use aws_sigv4::http_request::{
    sign as sign_request, SignableBody, SignableRequest, SigningSettings,
};
use aws_sigv4::sign::v4;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::aws_credentials::{process_env, CredentialChain, Env};
use crate::prometheus::config::SigV4Config;
use crate::prometheus::PrometheusError;

/// A signer for one `sigv4` block, with its credential cache; shared by every query with it.
#[derive(Debug)]
pub(crate) struct SigV4 {
    config: SigV4Config,
    chain: CredentialChain,
}

impl SigV4 {
    /// A signer with credentials from the process environment.
    pub(crate) fn new(config: SigV4Config) -> SigV4 {
        SigV4::with_env(config, process_env())
    }

    /// A signer reading `env` instead of the process environment.
    pub(crate) fn with_env(config: SigV4Config, env: Env) -> SigV4 {
        let chain = CredentialChain::new(config.profile.clone(), config.region.clone(), env);
        SigV4 { config, chain }
    }

    /// The session token of the credentials the next request is signed with, if any: the
    /// caller scrubs it from what the server answers.
    pub(crate) async fn session_token(&self) -> Result<Option<String>, PrometheusError> {
        Ok(self
            .chain
            .credentials()
            .await?
            .session_token()
            .map(str::to_string))
    }

    /// Adds the SigV4 headers (`Authorization`, `X-Amz-Date`, `X-Amz-Security-Token` for
    /// temporary credentials) for a request of `method` to `url` with `headers` and `body`.
    /// Every header in `headers` is signed except those a proxy may change (the crate's list:
    /// `User-Agent`, `Authorization`, `X-Amzn-Trace-Id`, `Transfer-Encoding`, ...).
    pub(crate) async fn sign(
        &self,
        method: &Method,
        url: &str,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), PrometheusError> {
        let credentials = self.chain.credentials().await?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.config.region)
            .name(&self.config.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| PrometheusError::Auth(format!("sigv4: {e}")))?;
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
            .collect();
        let signable = SignableRequest::new(
            method.as_str(),
            url,
            pairs.into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| {
            PrometheusError::Auth(format!("sigv4: cannot sign a request to {url}: {e}"))
        })?;
        let (instructions, _signature) = sign_request(signable, &params.into())
            .map_err(|e| PrometheusError::Auth(format!("sigv4: signing failed: {e}")))?
            .into_parts();
        let (added, _params) = instructions.into_parts();
        for header in added {
            let name = HeaderName::from_static(header.name());
            let mut value = HeaderValue::from_str(header.value()).map_err(|_| {
                PrometheusError::Auth(format!("sigv4: {} is not a header value", header.name()))
            })?;
            value.set_sensitive(header.sensitive() || name == http::header::AUTHORIZATION);
            headers.insert(name, value);
        }
        Ok(())
    }

    /// `e` with what an AWS refusal of the signature means, when the server refused it (403
    /// or 401 with AWS's wording): clock skew or a replayed request, a region or service the
    /// credentials are not scoped to, an unknown key, a wrong secret. Others unchanged.
    pub(crate) fn explain(&self, e: PrometheusError) -> PrometheusError {
        let PrometheusError::Http {
            origin,
            status: status @ (401 | 403),
            excerpt,
        } = e
        else {
            return e;
        };
        let lower = excerpt.to_ascii_lowercase();
        let region = &self.config.region;
        let service = &self.config.service;
        let why = if lower.contains("signature expired") || lower.contains("not yet current") {
            "the request's date is more than 5 minutes from AWS's clock: this machine's clock is skewed, or the request was replayed".to_string()
        } else if lower.contains("scoped to a valid region")
            || lower.contains("scoped to correct region")
        {
            format!("the workspace is not in region {region}: set sigv4.region to the region in its address")
        } else if lower.contains("scoped to correct service") {
            format!("the endpoint does not take service {service}: sigv4.service is `aps` for Amazon Managed Service for Prometheus")
        } else if lower.contains("security token included in the request is invalid")
            || lower.contains("unrecognizedclient")
            || lower.contains("invalidclienttokenid")
        {
            "AWS does not know the access key id (a wrong key, or a session that ended)".into()
        } else if lower.contains("signature we calculated does not match")
            || lower.contains("signaturedoesnotmatch")
        {
            "SignatureDoesNotMatch: the secret access key does not belong to the access key id, or a proxy changed the request".into()
        } else if lower.contains("security token included in the request is expired")
            || lower.contains("expiredtoken")
        {
            "the session token has expired".into()
        } else {
            "the signed request was refused (is the role allowed aps:QueryMetrics on this workspace?)".into()
        };
        PrometheusError::Http {
            origin,
            status,
            excerpt: format!("sigv4 refused: {why}; AWS said: {excerpt}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn signer(vars: &'static [(&'static str, &'static str)]) -> SigV4 {
        SigV4::with_env(
            SigV4Config {
                region: "us-east-1".into(),
                service: "aps".into(),
                profile: None,
            },
            Arc::new(move |k| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }),
        )
    }

    #[tokio::test]
    async fn signs_with_the_scope_and_marks_secrets_sensitive() {
        let s = signer(&[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_SESSION_TOKEN", "session-token-1"),
        ]);
        let mut headers = HeaderMap::new();
        headers.insert(
            "content-type",
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        s.sign(
            &Method::POST,
            "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/query",
            &mut headers,
            b"query=up",
        )
        .await
        .unwrap();
        let auth = headers[http::header::AUTHORIZATION].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            "{auth}"
        );
        assert!(auth.contains("/us-east-1/aps/aws4_request"), "{auth}");
        assert!(auth.contains("content-type;host;x-amz-date"), "{auth}");
        assert!(!auth.contains("EXAMPLEKEY"), "{auth}");
        assert!(headers[http::header::AUTHORIZATION].is_sensitive());
        let token = &headers["x-amz-security-token"];
        assert_eq!(token, "session-token-1");
        assert!(token.is_sensitive());
        assert!(headers.contains_key("x-amz-date"));
        assert_eq!(
            s.session_token().await.unwrap().as_deref(),
            Some("session-token-1")
        );
    }

    #[test]
    fn refusals_are_explained() {
        let s = signer(&[]);
        let refused = |status, body: &str| {
            s.explain(PrometheusError::Http {
                origin: crate::prometheus::Origin::unknown(),
                status,
                excerpt: body.into(),
            })
            .to_string()
        };
        for (body, want) in [
            (
                r#"{"message":"Signature expired: 20261205T060000Z is now earlier than 20261205T061000Z (20261205T061500Z - 5 min.)"}"#,
                "clock is skewed",
            ),
            (
                r#"{"message":"Credential should be scoped to a valid region. "}"#,
                "not in region us-east-1",
            ),
            (
                r#"{"message":"The security token included in the request is invalid."}"#,
                "does not know the access key id",
            ),
            (
                r#"{"message":"The request signature we calculated does not match the signature you provided."}"#,
                "SignatureDoesNotMatch",
            ),
        ] {
            let e = refused(403, body);
            assert!(e.contains(want), "{e}");
            assert!(e.contains(body), "{e}");
        }
        let other = s.explain(PrometheusError::Http {
            origin: crate::prometheus::Origin::unknown(),
            status: 500,
            excerpt: "boom".into(),
        });
        assert!(!other.to_string().contains("sigv4"), "{other}");
    }
}
