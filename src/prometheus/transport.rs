//! The HTTP transport under the Prometheus client: hyper-util's pooled client over TCP (hickory
//! DNS), rustls, and the proxies the environment names.
//!
//! Until issue 14's last stop this was reqwest, which wraps the same hyper-util client in
//! layers rollgate does not use (redirects, decompression, cookies), parses each request's URL
//! twice more and boxes its futures: a check's two queries cost 0.05–0.07 ms more through it
//! than through hyper-util's client alone (`cargo bench --bench serve_load overhead`, the floor
//! proxy built both ways; docs/serve.md), which was most of the share a check adds.

use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::PROXY_AUTHORIZATION;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls;
use tower::{Service, ServiceExt};

/// A request body: the encoded form (or nothing, for a GET).
pub(crate) type Body = Full<Bytes>;

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

type BoxError = Box<dyn StdError + Send + Sync>;
type Direct = HttpsConnector<HttpConnector<Resolver>>;

/// A pooled HTTP/1.1 and HTTP/2 client for one TLS setting.
pub(crate) struct Transport {
    client: hyper_util::client::legacy::Client<Connector, Body>,
    proxies: Option<Arc<Matcher>>,
}

/// The TLS settings a transport is built for.
pub(crate) struct TlsSettings {
    /// Accept any server certificate (`insecure_skip_verify`).
    pub(crate) insecure_skip_verify: bool,
    /// Certificates trusted besides the built-in roots.
    pub(crate) extra_roots: Vec<CertificateDer<'static>>,
}

impl Transport {
    /// A transport with `tls`, reading the proxy variables (`HTTP_PROXY`, `HTTPS_PROXY`,
    /// `ALL_PROXY`, `NO_PROXY`, either case) once, now.
    pub(crate) fn new(tls: TlsSettings) -> Result<Transport, String> {
        let config = Arc::new(tls_config(tls)?);
        let proxies = proxy_in_environment().then(|| Arc::new(Matcher::from_env()));
        let connector = Connector {
            direct: direct_connector(&config),
            config,
            proxies: proxies.clone(),
        };
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Transport { client, proxies })
    }

    /// Sends `request` and returns the response head (its body still to read).
    pub(crate) async fn send(
        &self,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
        // A plain-HTTP request through a proxy goes to the proxy in absolute form, with the
        // proxy's credentials beside it (an HTTPS one carries them in its CONNECT instead).
        if let Some(proxies) = &self.proxies {
            if request.uri().scheme_str() == Some("http") {
                if let Some(auth) = proxies
                    .intercept(request.uri())
                    .and_then(|p| p.basic_auth().cloned())
                {
                    request.headers_mut().insert(PROXY_AUTHORIZATION, auth);
                }
            }
        }
        self.client.request(request).await
    }
}

/// Whether the environment names a proxy, as curl and Go read the variables (and reqwest
/// did, through hyper-util 0.1.21's `Matcher::from_env`): `ALL_PROXY`, `HTTP_PROXY`,
/// `HTTPS_PROXY`, either case; `NO_PROXY` only narrows those. Without one, no request asks
/// the matcher (NO_PROXY's host and IP checks cost 3,100 instructions a check). Tested in
/// tests/it/prometheus_client/proxy.rs.
fn proxy_in_environment() -> bool {
    [
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some())
}

fn tls_config(tls: TlsSettings) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    if tls.insecure_skip_verify {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for cert in tls.extra_roots {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

fn direct_connector(config: &Arc<rustls::ClientConfig>) -> Direct {
    let mut http = HttpConnector::new_with_resolver(Resolver::default());
    http.enforce_http(false);
    http.set_nodelay(true);
    https(http, config)
}

/// `inner` with TLS for `https://` destinations (ALPN offering HTTP/2 and HTTP/1.1).
fn https<C>(inner: C, config: &Arc<rustls::ClientConfig>) -> HttpsConnector<C> {
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(rustls::ClientConfig::clone(config))
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(inner)
}

/// Connects to a destination directly, or through the proxy the environment names for it.
#[derive(Clone)]
struct Connector {
    direct: Direct,
    config: Arc<rustls::ClientConfig>,
    proxies: Option<Arc<Matcher>>,
}

impl Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let proxy = self.proxies.as_ref().and_then(|m| m.intercept(&dst));
        let direct = self.direct.clone();
        let Some(proxy) = proxy else {
            return Box::pin(async move { Ok(Stream::new(direct.oneshot(dst).await?, false)) });
        };
        if !matches!(proxy.uri().scheme_str(), Some("http" | "https")) {
            // SOCKS and the like: refused by name rather than spoken to in HTTP.
            let scheme = proxy.uri().scheme_str().unwrap_or_default().to_string();
            return Box::pin(async move {
                Err(format!(
                    "proxy scheme `{scheme}` is not supported: name an http:// or https:// proxy"
                )
                .into())
            });
        }
        if dst.scheme_str() == Some("https") {
            // Through an HTTP CONNECT tunnel, then TLS with the destination.
            let mut tunnel = Tunnel::new(proxy.uri().clone(), direct);
            if let Some(auth) = proxy.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            let tls = https(tunnel, &self.config);
            return Box::pin(async move { Ok(Stream::new(tls.oneshot(dst).await?, false)) });
        }
        let proxy_uri = proxy.uri().clone();
        Box::pin(async move { Ok(Stream::new(direct.oneshot(proxy_uri).await?, true)) })
    }
}

/// Any connection the connector makes, and whether it leads to a proxy (then hyper sends
/// requests in absolute form).
struct Stream {
    io: Pin<Box<dyn Io>>,
    proxied: bool,
}

trait Io: Read + Write + Connection + Send {}
impl<T: Read + Write + Connection + Send> Io for T {}

impl Stream {
    fn new(io: impl Io + 'static, proxied: bool) -> Stream {
        Stream {
            io: Box::pin(io),
            proxied,
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.proxied)
    }
}

impl Read for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.io.as_mut().poll_read(cx, buf)
    }
}

impl Write for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.io.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.io.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.io.as_mut().poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.io.as_mut().poll_write_vectored(cx, bufs)
    }
}

/// Host names resolved with hickory (a static binary cannot rely on glibc's NSS), from
/// /etc/resolv.conf and /etc/hosts, IPv4 and IPv6. Built on first use, inside the runtime;
/// a DNS configuration that cannot be read is tried again at the next connection.
#[derive(Clone, Default)]
struct Resolver {
    resolver: Arc<std::sync::Mutex<Option<hickory_resolver::TokioResolver>>>,
}

impl Resolver {
    fn get(&self) -> Result<hickory_resolver::TokioResolver, BoxError> {
        let mut slot = self.resolver.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(resolver) = slot.as_ref() {
            return Ok(resolver.clone());
        }
        let mut builder = hickory_resolver::TokioResolver::builder_tokio()
            .map_err(|e| format!("cannot read the DNS configuration: {e}"))?;
        builder.options_mut().ip_strategy = hickory_resolver::config::LookupIpStrategy::Ipv4AndIpv6;
        Ok(slot.insert(builder.build()).clone())
    }
}

impl Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolver = self.get();
        Box::pin(async move {
            let found = resolver?
                .lookup_ip(name.as_str())
                .await
                .map_err(|e| -> BoxError {
                    resolve_failure(name.as_str(), &e.to_string()).into()
                })?;
            let addrs: Vec<SocketAddr> = found.iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            Ok(addrs.into_iter())
        })
    }
}

/// Why `host` could not be resolved, in words: hickory's "no records found" errors print the
/// query as a Rust debug struct (`Query { name: Name("…"), … }`), which no user should read.
fn resolve_failure(host: &str, hickory: &str) -> String {
    if !hickory.starts_with("no records found") {
        return format!("cannot resolve {host}: {hickory}");
    }
    if hickory.contains("NXDomain") {
        format!("cannot resolve {host}: no such host (NXDOMAIN)")
    } else {
        format!("cannot resolve {host}: the name has no address records")
    }
}

/// `insecure_skip_verify`: any certificate is accepted; the handshake's signatures are still
/// checked, so the connection is at least with the holder of the certificate shown.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod resolve_tests {
    use super::resolve_failure;

    #[test]
    fn a_failed_lookup_reads_as_words_not_a_debug_struct() {
        let nx = r#"no records found for Query { query_type: AAAA, query_class: IN, name: Name("prom.invalid.") }, response_code: NXDomain"#;
        assert_eq!(
            resolve_failure("prom.invalid", nx),
            "cannot resolve prom.invalid: no such host (NXDOMAIN)"
        );
        let empty =
            r#"no records found for Query { query_type: A, query_class: IN, name: Name("prom.") }"#;
        let shown = resolve_failure("prom", empty);
        assert_eq!(
            shown,
            "cannot resolve prom: the name has no address records"
        );
        assert!(!shown.contains("Query {"));
        assert_eq!(
            resolve_failure("prom", "request timed out"),
            "cannot resolve prom: request timed out"
        );
    }
}
