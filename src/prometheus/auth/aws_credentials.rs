//! The AWS credential chain an EKS pod uses, written for the two HTTP steps it needs instead of
//! taking aws-config (the SDK's chain brings aws-smithy-runtime, aws-runtime, generated STS and
//! SSO clients and a second HTTP stack: several times rollgate's own compile time for four
//! sources).
//!
//! Sources, in the order the SDK's default chain reads the ones an EKS pod has:
//! 1. the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
//! 2. web identity (IRSA): `AWS_ROLE_ARN` + `AWS_WEB_IDENTITY_TOKEN_FILE` exchanged at STS
//!    (`AssumeRoleWithWebIdentity`); the token file is read again at every exchange, so the
//!    kubelet's rotation of it is picked up; STS is `AWS_ENDPOINT_URL_STS` (else
//!    `AWS_ENDPOINT_URL`), else the regional endpoint;
//! 3. EKS Pod Identity / ECS: `AWS_CONTAINER_CREDENTIALS_FULL_URI` (or `_RELATIVE_URI`) with
//!    the token of `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (or `_TOKEN`);
//! 4. the shared credentials file: `AWS_SHARED_CREDENTIALS_FILE` or `~/.aws/credentials`,
//!    profile `AWS_PROFILE` or `default`.
//!
//! A spec that names a `profile` uses the shared credentials file only (as the SDK does for an
//! explicit profile). Temporary credentials are kept until five minutes before they expire and
//! refreshed by one caller while the others wait for its answer. Nothing here logs or returns a
//! secret: errors name the source and the step.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use serde::Deserialize;

use crate::prometheus::PrometheusError;

/// Temporary credentials are refreshed this long before they expire, so that a request signed
/// with them does not arrive after their end (the SDK's default buffer).
pub(crate) const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// Credentials without an expiry (environment, shared file) are read again after this long, so
/// that a changed file is picked up without a restart.
const STATIC_FOR: Duration = Duration::from_secs(60);
/// Each HTTP step of the chain (STS, the Pod Identity agent).
const STEP_TIMEOUT: Duration = Duration::from_secs(5);
/// An STS or agent answer larger than this is not credentials.
const MAX_ANSWER: usize = 64 * 1024;
/// The container credential hosts the SDK accepts over plain HTTP besides loopback: the ECS
/// agent and the EKS Pod Identity agent (IPv4 and IPv6).
const CONTAINER_HOSTS: &[&str] = &["169.254.170.2", "169.254.170.23", "[fd00:ec2::23]"];

/// Where the environment variables come from (the process; a map in tests).
pub(crate) type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment, empty values counting as unset (as the SDK reads them).
pub(crate) fn process_env() -> Env {
    Arc::new(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The shared credentials file the chain reads: `AWS_SHARED_CREDENTIALS_FILE`, else
/// `~/.aws/credentials` (the trust policy checks where it lies).
pub fn shared_credentials_file() -> Option<PathBuf> {
    credentials_file_in(&process_env())
}

fn credentials_file_in(env: &Env) -> Option<PathBuf> {
    env("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")))
}

/// A credential chain with its cache; one per distinct `sigv4` block, shared by every check.
pub(crate) struct CredentialChain {
    /// The spec's `profile`: the shared credentials file only.
    profile: Option<String>,
    /// The signing region, for STS's regional endpoint when no region is in the environment.
    region: String,
    env: Env,
    /// Held while refreshing: concurrent checks wait for one answer instead of each asking.
    cache: tokio::sync::Mutex<Option<Cached>>,
}

impl std::fmt::Debug for CredentialChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialChain")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

struct Cached {
    credentials: Credentials,
    /// When to ask again.
    renew_at: SystemTime,
}

impl CredentialChain {
    /// A chain reading `env`; `profile` selects the shared file only.
    pub(crate) fn new(profile: Option<String>, region: String, env: Env) -> CredentialChain {
        CredentialChain {
            profile,
            region,
            env,
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// Credentials to sign with now: the cached ones while they last, else the chain's.
    pub(crate) async fn credentials(&self) -> Result<Credentials, PrometheusError> {
        let mut cache = self.cache.lock().await;
        let now = SystemTime::now();
        if let Some(c) = cache.as_ref().filter(|c| now < c.renew_at) {
            return Ok(c.credentials.clone());
        }
        let credentials = self.resolve().await?;
        let renew_at = match credentials.expiry() {
            Some(expiry) => expiry
                .checked_sub(REFRESH_BEFORE_EXPIRY)
                .unwrap_or(now)
                .max(now),
            None => now + STATIC_FOR,
        };
        *cache = Some(Cached {
            credentials: credentials.clone(),
            renew_at,
        });
        Ok(credentials)
    }

    fn var(&self, name: &str) -> Option<String> {
        (self.env)(name)
    }

    /// The first source that is configured; its failure is the answer (a configured source
    /// that fails is not skipped, or a broken IRSA setup would sign as someone else).
    async fn resolve(&self) -> Result<Credentials, PrometheusError> {
        if let Some(profile) = &self.profile {
            return self.shared_file(profile);
        }
        if let Some(c) = self.environment()? {
            return Ok(c);
        }
        if let (Some(role), Some(token_file)) = (
            self.var("AWS_ROLE_ARN"),
            self.var("AWS_WEB_IDENTITY_TOKEN_FILE"),
        ) {
            return self.web_identity(&role, &token_file).await;
        }
        if let Some(uri) = self.container_uri()? {
            return self.container(&uri).await;
        }
        let profile = self.var("AWS_PROFILE").unwrap_or_else(|| "default".into());
        let file = self.credentials_file();
        match &file {
            Some(path) if path.exists() => self.shared_file(&profile),
            _ => Err(PrometheusError::Auth(format!(
                "no AWS credentials found for sigv4; tried: environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not set), web identity (AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE not set), EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI not set), shared credentials file ({} does not exist)",
                file.map_or_else(|| "no home directory".to_string(), |p| p.display().to_string())
            ))),
        }
    }

    fn environment(&self) -> Result<Option<Credentials>, PrometheusError> {
        match (
            self.var("AWS_ACCESS_KEY_ID"),
            self.var("AWS_SECRET_ACCESS_KEY"),
        ) {
            (Some(id), Some(secret)) => Ok(Some(Credentials::new(
                id,
                secret,
                self.var("AWS_SESSION_TOKEN"),
                None,
                "environment",
            ))),
            (Some(_), None) => Err(PrometheusError::Auth(
                "environment credentials: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".into(),
            )),
            (None, Some(_)) => Err(PrometheusError::Auth(
                "environment credentials: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".into(),
            )),
            (None, None) => Ok(None),
        }
    }

    fn credentials_file(&self) -> Option<PathBuf> {
        credentials_file_in(&self.env)
    }

    /// The shared credentials file, read on every refresh (it is small and local; a read per
    /// minute at most).
    fn shared_file(&self, profile: &str) -> Result<Credentials, PrometheusError> {
        let Some(path) = self.credentials_file() else {
            return Err(PrometheusError::Auth(
                "shared credentials file: neither AWS_SHARED_CREDENTIALS_FILE nor HOME is set"
                    .into(),
            ));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            PrometheusError::Auth(format!(
                "shared credentials file {}: cannot read it: {e}",
                path.display()
            ))
        })?;
        let keys = profile_keys(&text, profile);
        let get = |key: &str| {
            keys.iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        match (get("aws_access_key_id"), get("aws_secret_access_key")) {
            (Some(id), Some(secret)) => Ok(Credentials::new(
                id,
                secret,
                get("aws_session_token"),
                None,
                "shared-file",
            )),
            _ if keys.is_empty() => Err(PrometheusError::Auth(format!(
                "shared credentials file {}: no profile [{profile}] with keys in it",
                path.display()
            ))),
            _ => Err(PrometheusError::Auth(format!(
                "shared credentials file {}: profile [{profile}] lacks aws_access_key_id or aws_secret_access_key (rollgate reads static keys only: no role_arn, SSO or credential_process)",
                path.display()
            ))),
        }
    }

    /// IRSA: the pod's projected service-account token exchanged for a role's credentials.
    /// API reference: https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html
    async fn web_identity(
        &self,
        role: &str,
        token_file: &str,
    ) -> Result<Credentials, PrometheusError> {
        let step = "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)";
        let token = tokio::fs::read_to_string(token_file).await.map_err(|e| {
            PrometheusError::Auth(format!(
                "{step}: cannot read the token file {token_file}: {e}"
            ))
        })?;
        let token = token.trim();
        if token.is_empty() {
            return Err(PrometheusError::Auth(format!(
                "{step}: the token file {token_file} is empty"
            )));
        }
        let endpoint = self.sts_endpoint();
        let session = self.var("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| {
            format!(
                "rollgate-{}",
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            )
        });
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", role),
            ("RoleSessionName", session.as_str()),
            ("WebIdentityToken", token),
        ];
        let http = http_client(true)?;
        let sts = format!("STS at {endpoint}");
        let response = http
            .post(&endpoint)
            .header("Accept", "application/xml")
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                PrometheusError::Auth(format!(
                    "{step}: {sts} is unreachable: {}",
                    reqwest_cause(&e)
                ))
            })?;
        let status = response.status().as_u16();
        let body = read_limited(response).await.map_err(|e| {
            PrometheusError::Auth(format!("{step}: {sts} broke off its answer: {e}"))
        })?;
        let text = String::from_utf8_lossy(&body);
        if status != 200 {
            let code = xml_tag(&text, "Code").unwrap_or_else(|| format!("HTTP {status}"));
            let message = xml_tag(&text, "Message").unwrap_or_default();
            return Err(PrometheusError::Auth(format!(
                "{step}: {sts} refused AssumeRoleWithWebIdentity for {role}: {code}{}{}",
                if message.is_empty() { "" } else { ": " },
                one_line(&message)
            )));
        }
        let field = |name: &str| {
            xml_tag(&text, name).ok_or_else(|| {
                PrometheusError::Auth(format!(
                    "{step}: {sts} answered without {name}: not an AssumeRoleWithWebIdentity response"
                ))
            })
        };
        let expiry = parse_expiry(&field("Expiration")?).ok_or_else(|| {
            PrometheusError::Auth(format!("{step}: {sts} answered an unreadable Expiration"))
        })?;
        Ok(Credentials::new(
            field("AccessKeyId")?,
            field("SecretAccessKey")?,
            Some(field("SessionToken")?),
            Some(expiry),
            "web-identity",
        ))
    }

    /// STS's address: the override variables, else the regional endpoint (the SDK's default
    /// since 2024; a pod's `AWS_REGION` from the EKS webhook, else the signing region).
    fn sts_endpoint(&self) -> String {
        if let Some(url) = self
            .var("AWS_ENDPOINT_URL_STS")
            .or_else(|| self.var("AWS_ENDPOINT_URL"))
        {
            return url;
        }
        let region = self
            .var("AWS_REGION")
            .or_else(|| self.var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| self.region.clone());
        format!("https://sts.{region}.amazonaws.com/")
    }

    /// The container credential endpoint, when one is set, checked as the SDK checks it: a
    /// full URI must be HTTPS, loopback or one of the agents' link-local addresses, so that an
    /// environment variable cannot send the agent's token elsewhere in clear text.
    fn container_uri(&self) -> Result<Option<String>, PrometheusError> {
        if let Some(relative) = self.var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
            return Ok(Some(format!("http://169.254.170.2{relative}")));
        }
        let Some(full) = self.var("AWS_CONTAINER_CREDENTIALS_FULL_URI") else {
            return Ok(None);
        };
        let bad = |why: &str| {
            PrometheusError::Auth(format!(
                "EKS Pod Identity: AWS_CONTAINER_CREDENTIALS_FULL_URI {why}"
            ))
        };
        let url = url::Url::parse(&full).map_err(|_| bad("is not a URL"))?;
        let allowed = match url.scheme() {
            "https" => true,
            "http" => match url.host() {
                Some(url::Host::Ipv4(ip)) => {
                    ip.is_loopback() || CONTAINER_HOSTS.contains(&ip.to_string().as_str())
                }
                Some(url::Host::Ipv6(ip)) => {
                    ip.is_loopback() || CONTAINER_HOSTS.contains(&format!("[{ip}]").as_str())
                }
                Some(url::Host::Domain(d)) => d == "localhost",
                None => false,
            },
            _ => false,
        };
        if !allowed {
            return Err(bad(
                "must be https, loopback or the EKS Pod Identity / ECS agent's address",
            ));
        }
        Ok(Some(full))
    }

    /// EKS Pod Identity (and ECS): the agent answers the role's credentials as JSON.
    async fn container(&self, uri: &str) -> Result<Credentials, PrometheusError> {
        let step = "EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI)";
        let token = match self.var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(path) => Some(
                tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|e| {
                        PrometheusError::Auth(format!(
                            "{step}: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {path}: {e}"
                        ))
                    })?
                    .trim()
                    .to_string(),
            ),
            None => self.var("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        };
        // The agent is local: a proxy from the environment must not see its token.
        let http = http_client(false)?;
        let mut request = http.get(uri).header("Accept", "application/json");
        if let Some(token) = token {
            let mut value = http::HeaderValue::from_str(&token).map_err(|_| {
                PrometheusError::Auth(format!(
                    "{step}: the authorization token holds characters not allowed in a header"
                ))
            })?;
            value.set_sensitive(true);
            request = request.header(http::header::AUTHORIZATION, value);
        }
        let agent = format!("the agent at {}", crate::prometheus::redact_url(uri));
        let response = request.send().await.map_err(|e| {
            PrometheusError::Auth(format!(
                "{step}: {agent} is unreachable: {}",
                reqwest_cause(&e)
            ))
        })?;
        let status = response.status().as_u16();
        let body = read_limited(response).await.map_err(|e| {
            PrometheusError::Auth(format!("{step}: {agent} broke off its answer: {e}"))
        })?;
        if status != 200 {
            #[derive(Deserialize)]
            struct Refusal {
                code: Option<String>,
                message: Option<String>,
            }
            let why = serde_json::from_slice::<Refusal>(&body)
                .ok()
                .map(|r| {
                    [r.code, r.message]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(": ")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(PrometheusError::Auth(format!(
                "{step}: {agent} refused: {}",
                one_line(&why)
            )));
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Answer {
            access_key_id: String,
            secret_access_key: String,
            token: Option<String>,
            expiration: Option<String>,
        }
        let answer: Answer = serde_json::from_slice(&body).map_err(|_| {
            PrometheusError::Auth(format!(
                "{step}: {agent} answered something other than credentials (AccessKeyId, SecretAccessKey, Token, Expiration)"
            ))
        })?;
        let expiry = match &answer.expiration {
            Some(e) => Some(parse_expiry(e).ok_or_else(|| {
                PrometheusError::Auth(format!("{step}: {agent} answered an unreadable Expiration"))
            })?),
            None => None,
        };
        Ok(Credentials::new(
            answer.access_key_id,
            answer.secret_access_key,
            answer.token,
            expiry,
            "container",
        ))
    }
}

/// A client for one step: no redirects (a credential answer is never elsewhere), a timeout,
/// and the environment's proxies only when `proxies` (STS is remote, the agent local).
fn http_client(proxies: bool) -> Result<reqwest::Client, PrometheusError> {
    let mut builder = reqwest::Client::builder()
        .timeout(STEP_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("rollgate/", env!("CARGO_PKG_VERSION")));
    if !proxies {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| PrometheusError::Auth(format!("cannot set up the credential client: {e}")))
}

/// The innermost cause of a failed request, on one line.
fn reqwest_cause(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = s.to_string();
        source = s.source();
    }
    if e.is_timeout() {
        format!("no answer within {} s", STEP_TIMEOUT.as_secs())
    } else {
        one_line(&text)
    }
}

/// The body, at most [`MAX_ANSWER`] bytes.
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| reqwest_cause(&e))? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `text` on one line, at most 300 characters (an upstream message in ours).
fn one_line(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line,
    }
}

/// RFC 3339 / ISO 8601 (`2026-12-05T06:00:00Z`, STS also sends fractional seconds).
fn parse_expiry(text: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(SystemTime::from)
}

/// The text of the first `<name>…</name>` element, entities decoded. STS's answers are
/// flat and known (the API reference's examples): a tag search is enough, and a missing or
/// malformed element is an error naming it.
fn xml_tag(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    let raw = text[start..end].trim();
    Some(
        raw.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// The `key = value` lines of `[profile]` in a shared credentials file (INI: `#`/`;`
/// comments, keys case-insensitive).
fn profile_keys(text: &str, profile: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = section.trim() == profile;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                keys.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn env(vars: &[(&str, &str)]) -> Env {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Arc::new(move |k| map.get(k).cloned())
    }

    fn chain(vars: &[(&str, &str)]) -> CredentialChain {
        CredentialChain::new(None, "us-east-1".into(), env(vars))
    }

    #[tokio::test]
    async fn environment_comes_first() {
        let c = chain(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent"),
        ])
        .credentials()
        .await
        .unwrap();
        assert_eq!(c.access_key_id(), "AKIDENV");
        assert_eq!(c.session_token(), Some("t"));
    }

    #[tokio::test]
    async fn nothing_configured_lists_every_source_tried() {
        let e = chain(&[("HOME", "/nonexistent-home")])
            .credentials()
            .await
            .unwrap_err()
            .to_string();
        for source in [
            "environment",
            "web identity",
            "EKS Pod Identity",
            "shared credentials file",
            "/nonexistent-home/.aws/credentials",
        ] {
            assert!(e.contains(source), "{source} in {e}");
        }
        let e = chain(&[("AWS_ACCESS_KEY_ID", "A")])
            .credentials()
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("AWS_SECRET_ACCESS_KEY is not"), "{e}");
    }

    #[tokio::test]
    async fn shared_file_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = AKIDDEF\naws_secret_access_key = s1\n\n# c\n[team]\nAWS_ACCESS_KEY_ID=AKIDTEAM\naws_secret_access_key=s2\naws_session_token = tok\n[sso]\nsso_session = x\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let vars = [("AWS_SHARED_CREDENTIALS_FILE", path)];
        let c = chain(&vars).credentials().await.unwrap();
        assert_eq!(c.access_key_id(), "AKIDDEF");
        let c = chain(&[
            ("AWS_SHARED_CREDENTIALS_FILE", path),
            ("AWS_PROFILE", "team"),
        ])
        .credentials()
        .await
        .unwrap();
        assert_eq!(c.access_key_id(), "AKIDTEAM");
        assert_eq!(c.session_token(), Some("tok"));
        // A spec's profile wins over the environment's keys.
        let named = CredentialChain::new(
            Some("team".into()),
            "r".into(),
            env(&[
                ("AWS_SHARED_CREDENTIALS_FILE", path),
                ("AWS_ACCESS_KEY_ID", "AKIDENV"),
                ("AWS_SECRET_ACCESS_KEY", "x"),
            ]),
        );
        assert_eq!(
            named.credentials().await.unwrap().access_key_id(),
            "AKIDTEAM"
        );
        for (profile, want) in [
            ("sso", "lacks aws_access_key_id"),
            ("nope", "no profile [nope]"),
        ] {
            let e = CredentialChain::new(Some(profile.into()), "r".into(), env(&vars))
                .credentials()
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("s1") && !e.contains("AKIDDEF"), "{e}");
        }
    }

    #[test]
    fn container_uri_must_be_local_or_https() {
        for (uri, ok) in [
            ("http://169.254.170.23/v1/credentials", true),
            ("http://127.0.0.1:9/x", true),
            ("http://[fd00:ec2::23]/v1/credentials", true),
            ("https://creds.example/x", true),
            ("http://evil.example/x", false),
            ("http://10.0.0.1/x", false),
            ("file:///etc/passwd", false),
        ] {
            let c = chain(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri)]);
            assert_eq!(c.container_uri().is_ok(), ok, "{uri}");
        }
    }

    #[test]
    fn xml_and_expiry() {
        let answer = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><SessionToken>a&amp;b</SessionToken><Expiration>2026-12-05T06:00:00.123Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(xml_tag(answer, "SessionToken").as_deref(), Some("a&b"));
        assert_eq!(xml_tag(answer, "AccessKeyId"), None);
        let t = parse_expiry(&xml_tag(answer, "Expiration").unwrap()).unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_796_450_400);
        assert!(parse_expiry("tomorrow").is_none());
    }

    /// A one-route STS for the cache tests: answers each exchange with a new key that expires
    /// `lifetime` from now, after `delay`, and counts the exchanges.
    async fn sts(lifetime: Duration, delay: Duration) -> (String, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let n = counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let _ = s.read(&mut buf).await;
                    tokio::time::sleep(delay).await;
                    let expiry = chrono::Utc::now() + lifetime;
                    let body = format!(
                        "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>AKID{n}</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                        expiry.to_rfc3339()
                    );
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    let _ = s.write_all(body.as_bytes()).await;
                });
            }
        });
        (url, count)
    }

    #[tokio::test]
    async fn concurrent_checks_share_one_exchange_and_refresh_before_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "jwt").unwrap();
        let (url, count) = sts(Duration::from_secs(3600), Duration::from_millis(200)).await;
        let chain = Arc::new(chain(&[
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.to_str().unwrap()),
            ("AWS_ENDPOINT_URL_STS", &url),
        ]));
        let checks: Vec<_> = (0..16)
            .map(|_| {
                let chain = chain.clone();
                tokio::spawn(async move { chain.credentials().await.unwrap() })
            })
            .collect();
        for c in checks {
            assert_eq!(c.await.unwrap().access_key_id(), "AKID0");
        }
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "one exchange for 16 checks"
        );
        // Credentials within the refresh margin of their expiry are exchanged again.
        let (url, count) = sts(
            REFRESH_BEFORE_EXPIRY + Duration::from_secs(1),
            Duration::ZERO,
        )
        .await;
        let chain = CredentialChain::new(
            None,
            "r".into(),
            env(&[
                ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", token.to_str().unwrap()),
                ("AWS_ENDPOINT_URL_STS", &url),
            ]),
        );
        assert_eq!(chain.credentials().await.unwrap().access_key_id(), "AKID0");
        assert_eq!(chain.credentials().await.unwrap().access_key_id(), "AKID0");
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(chain.credentials().await.unwrap().access_key_id(), "AKID1");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn sts_down_names_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "jwt").unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/");
        let e = chain(&[
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.to_str().unwrap()),
            ("AWS_ENDPOINT_URL_STS", &url),
        ])
        .credentials()
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("web identity") && e.contains("unreachable"),
            "{e}"
        );
        assert!(!e.contains("jwt"), "{e}");
    }
}
