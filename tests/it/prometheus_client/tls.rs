//! HTTPS: a CA file, insecure_skip_verify, and certificate verification actually happening.

use std::sync::Arc;

use crate::support::stub::{json, vector_body, Stub};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rollgate::prometheus::{Client, PrometheusConfig, PrometheusError, QueryData, QueryRequest};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};

pub(super) struct Pki {
    pub(super) ca_pem: String,
    pub(super) config: Arc<ServerConfig>,
}

/// A test CA and a server certificate for 127.0.0.1 signed by it.
pub(super) fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rollgate test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();

    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        config: Arc::new(config),
    }
}

fn up() -> QueryRequest {
    QueryRequest::instant("up", None)
}

#[tokio::test]
async fn tls_with_ca_file_insecure_and_unverified() {
    let pki = pki();
    let stub = Stub::script_tls(pki.config.clone(), |_, _| json(200, &vector_body("4")));
    let address = format!("https://{}", stub.addr);
    let client = Client::new();

    // Unknown issuer: the handshake fails and nothing reaches the server.
    let mut c = PrometheusConfig::new(address.clone());
    c.retries = 0;
    let e = client.query(&c, &up(), None).await.unwrap_err();
    assert!(matches!(e, PrometheusError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("certificate"), "{e}");
    assert_eq!(stub.requests(), 0);

    // The CA file makes it trusted.
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, &pki.ca_pem).unwrap();
    let mut trusted = c.clone();
    trusted.ca_file = Some(ca_path.clone());
    let r = client.query(&trusted, &up(), None).await.unwrap();
    assert!(matches!(&r.data, QueryData::Vector(v) if v[0].sample.value == 4.0));
    assert_eq!(stub.requests(), 1);

    // insecure_skip_verify accepts it without the CA.
    let mut insecure = c.clone();
    insecure.insecure_skip_verify = true;
    let r = client.query(&insecure, &up(), None).await.unwrap();
    assert!(matches!(&r.data, QueryData::Vector(v) if v.len() == 1));
    assert_eq!(stub.requests(), 2);

    // A CA file that is not PEM is a configuration error naming the file.
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let mut bad = c.clone();
    bad.ca_file = Some(garbage.clone());
    let e = client.query(&bad, &up(), None).await.unwrap_err();
    assert!(matches!(e, PrometheusError::Config(_)), "{e:?}");
    assert!(
        e.to_string().contains(&garbage.display().to_string()),
        "{e}"
    );
    assert!(!e.to_string().contains("not a certificate"), "{e}");
}

#[tokio::test]
async fn a_different_ca_is_not_trusted() {
    let server = pki();
    let other = pki();
    let stub = Stub::script_tls(server.config.clone(), |_, _| json(200, &vector_body("1")));
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("other-ca.pem");
    std::fs::write(&ca_path, &other.ca_pem).unwrap();
    let mut c = PrometheusConfig::new(format!("https://{}", stub.addr));
    c.retries = 0;
    c.ca_file = Some(ca_path);
    let e = Client::new().query(&c, &up(), None).await.unwrap_err();
    assert!(matches!(e, PrometheusError::Connect { .. }), "{e:?}");
    assert_eq!(stub.requests(), 0);
}

/// An HTTPS server that speaks HTTP/2 only (ALPN `h2`), as Prometheus behind many ingresses
/// does: the client must offer h2 and speak it. Answers every query with one sample of 7 and
/// records each request's HTTP version.
async fn h2_only_server(
    pki: &Pki,
) -> (
    std::net::SocketAddr,
    Arc<std::sync::Mutex<Vec<http::Version>>>,
) {
    let mut config = (*pki.config).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let versions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = versions.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let seen = seen.clone();
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    seen.lock().unwrap().push(req.version());
                    let body = http_body_util::Full::new(bytes::Bytes::from(vector_body("7")));
                    async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(body)) }
                });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service),
            );
        }
    });
    (addr, versions)
}

#[tokio::test]
async fn http2_is_spoken_with_a_server_that_offers_only_it() {
    let pki = pki();
    let (addr, versions) = h2_only_server(&pki).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, &pki.ca_pem).unwrap();
    let mut c = PrometheusConfig::new(format!("https://{addr}"));
    c.ca_file = Some(ca_path);
    c.retries = 0;
    let client = Client::new();
    for _ in 0..2 {
        let r = client.query(&c, &up(), None).await.unwrap();
        assert!(matches!(&r.data, QueryData::Vector(v) if v[0].sample.value == 7.0));
    }
    assert_eq!(*versions.lock().unwrap(), vec![http::Version::HTTP_2; 2]);
}
