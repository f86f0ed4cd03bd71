//! go-plugin's AutoMTLS, plugin side: the host passes its certificate in `PLUGIN_CLIENT_CERT`
//! (PEM); the plugin answers with a fresh self-signed certificate for `localhost` (its DER,
//! base64 without padding, in the handshake's sixth field) and accepts only connections whose
//! client certificate is the host's, byte for byte.
//!
//! go-plugin hosts make their certificate with an ECDSA P-521 key, which the `ring` provider
//! cannot verify; the client's signature is checked with a pure-Rust P-521 verifier here.

use std::sync::Arc;

use base64::Engine as _;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{
    alg_id, AlgorithmIdentifier, CertificateDer, InvalidSignature, PrivateKeyDer,
    PrivatePkcs8KeyDer, SignatureVerificationAlgorithm, UnixTime,
};
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    ring, verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms,
};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{
    self, CertificateError, DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme,
};
use tokio_rustls::TlsAcceptor;

use super::GrpcError;

/// The TLS side of an AutoMTLS plugin.
pub(crate) struct AutoMtls {
    /// Accepts connections presenting the host's certificate.
    pub acceptor: TlsAcceptor,
    /// The plugin's certificate for the handshake line: DER, base64, no padding.
    pub certificate: String,
}

/// Sets up AutoMTLS for the host certificate(s) in `client_pem`.
pub(crate) fn auto_mtls(client_pem: &str) -> Result<AutoMtls, GrpcError> {
    let expected = CertificateDer::pem_slice_iter(client_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| GrpcError::ClientCert(e.to_string()))?;
    if expected.is_empty() {
        return Err(GrpcError::ClientCert(
            "no PEM CERTIFICATE block found".into(),
        ));
    }
    let (cert, key) = self_signed()?;
    let certificate = base64::engine::general_purpose::STANDARD_NO_PAD.encode(cert.as_ref());
    let provider = Arc::new(ring::default_provider());
    let verifier = Arc::new(PinnedClientCert {
        expected,
        standard: provider.signature_verification_algorithms,
    });
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| GrpcError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert], key)
        .map_err(|e| GrpcError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(AutoMtls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        certificate,
    })
}

/// A new key pair and a self-signed certificate for `localhost`, usable by both ends as
/// go-plugin's own are (a CA certificate, server and client authentication).
fn self_signed() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), GrpcError> {
    let fail = |e: rcgen::Error| GrpcError::Tls(format!("generating the certificate: {e}"));
    let key = rcgen::KeyPair::generate().map_err(fail)?;
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).map_err(fail)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "rollgate");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
        rcgen::KeyUsagePurpose::KeyAgreement,
        rcgen::KeyUsagePurpose::KeyCertSign,
    ];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = params.self_signed(&key).map_err(fail)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((cert.der().clone(), key))
}

/// Accepts exactly the host's certificate(s); checks the handshake signature with `ring`'s
/// algorithms plus P-521.
#[derive(Debug)]
struct PinnedClientCert {
    expected: Vec<CertificateDer<'static>>,
    standard: WebPkiSupportedAlgorithms,
}

impl PinnedClientCert {
    fn algorithms(&self, scheme: SignatureScheme) -> &WebPkiSupportedAlgorithms {
        if scheme == SignatureScheme::ECDSA_NISTP521_SHA512 {
            &P521_ALGORITHMS
        } else {
            &self.standard
        }
    }
}

impl ClientCertVerifier for PinnedClientCert {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if self
            .expected
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, self.algorithms(dss.scheme))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, self.algorithms(dss.scheme))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        let mut schemes = self.standard.supported_schemes();
        schemes.push(SignatureScheme::ECDSA_NISTP521_SHA512);
        schemes
    }
}

/// ECDSA on P-521 with SHA-512, as go-plugin hosts sign.
#[derive(Debug)]
struct EcdsaP521Sha512;

impl SignatureVerificationAlgorithm for EcdsaP521Sha512 {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        use p521::ecdsa::signature::Verifier;
        let key =
            p521::ecdsa::VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
        let signature =
            p521::ecdsa::Signature::from_der(signature).map_err(|_| InvalidSignature)?;
        key.verify(message, &signature)
            .map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_P521
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_SHA512
    }
}

static P521_ALGORITHMS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[&EcdsaP521Sha512],
    mapping: &[(SignatureScheme::ECDSA_NISTP521_SHA512, &[&EcdsaP521Sha512])],
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
    use tokio_rustls::rustls::pki_types::ServerName;
    use tokio_rustls::rustls::ClientConfig;
    use tokio_rustls::TlsConnector;

    /// A deterministic generator, enough to make ECDSA nonces in a test.
    struct CountingRng(u64);

    impl p521::elliptic_curve::rand_core::RngCore for CountingRng {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            for b in dest {
                *b = (self.next_u64() >> 56) as u8;
            }
        }
        fn try_fill_bytes(
            &mut self,
            dest: &mut [u8],
        ) -> Result<(), p521::elliptic_curve::rand_core::Error> {
            self.fill_bytes(dest);
            Ok(())
        }
    }

    impl p521::elliptic_curve::rand_core::CryptoRng for CountingRng {}

    #[test]
    fn p521_signatures_verify_and_forgeries_do_not() {
        use p521::ecdsa::signature::RandomizedSigner;
        let mut secret = [0x11u8; 66];
        secret[0] = 0;
        let sk = p521::ecdsa::SigningKey::from_slice(&secret).unwrap();
        let public = p521::ecdsa::VerifyingKey::from(&sk).to_encoded_point(false);
        let sig: p521::ecdsa::Signature =
            sk.sign_with_rng(&mut CountingRng(7), b"handshake transcript");
        let der = sig.to_der();
        let alg = EcdsaP521Sha512;
        assert!(alg
            .verify_signature(public.as_bytes(), b"handshake transcript", der.as_bytes())
            .is_ok());
        assert!(alg
            .verify_signature(public.as_bytes(), b"another transcript", der.as_bytes())
            .is_err());
        assert!(alg
            .verify_signature(public.as_bytes(), b"handshake transcript", b"\x30\x00")
            .is_err());
        assert!(alg
            .verify_signature(b"\x04garbage", b"handshake transcript", der.as_bytes())
            .is_err());
    }

    #[test]
    fn bad_client_certificates_are_refused() {
        assert!(matches!(auto_mtls(""), Err(GrpcError::ClientCert(_))));
        assert!(matches!(
            auto_mtls("not a certificate"),
            Err(GrpcError::ClientCert(_))
        ));
    }

    /// Trusts exactly the certificate of the handshake line, as go-plugin hosts do (webpki's
    /// own verifier refuses a CA certificate as the server's, which go-plugin's are).
    #[derive(Debug)]
    struct PinnedServer(CertificateDer<'static>);

    impl ServerCertVerifier for PinnedServer {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _name: &ServerName<'_>,
            _ocsp: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            if end_entity.as_ref() == self.0.as_ref() {
                Ok(ServerCertVerified::assertion())
            } else {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer,
                ))
            }
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algs = ring::default_provider().signature_verification_algorithms;
            verify_tls12_signature(message, cert, dss, &algs)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algs = ring::default_provider().signature_verification_algorithms;
            verify_tls13_signature(message, cert, dss, &algs)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }

    fn client_identity() -> (String, CertificateDer<'static>, PrivateKeyDer<'static>) {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
        (ck.cert.pem(), ck.cert.der().clone(), key)
    }

    /// Connects with `identity` (or none) to an AutoMTLS acceptor and exchanges a byte.
    async fn exchange(
        server: &AutoMtls,
        identity: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
    ) -> Result<u8, String> {
        let der = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(&server.certificate)
            .unwrap();
        let builder = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedServer(CertificateDer::from(der))));
        let mut config = match identity {
            Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        let (a, b) = tokio::io::duplex(64 * 1024);
        let acceptor = server.acceptor.clone();
        let srv = tokio::spawn(async move {
            let mut tls = acceptor.accept(b).await.map_err(|e| e.to_string())?;
            tls.write_all(&[42]).await.map_err(|e| e.to_string())?;
            tls.flush().await.map_err(|e| e.to_string())
        });
        let connector = TlsConnector::from(Arc::new(config));
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = connector
            .connect(name, a)
            .await
            .map_err(|e| e.to_string())?;
        let mut byte = [0u8];
        let read = tokio::time::timeout(Duration::from_secs(5), tls.read_exact(&mut byte)).await;
        let server_side = srv.await.unwrap();
        match (read, server_side) {
            (Ok(Ok(_)), Ok(())) => Ok(byte[0]),
            (read, server_side) => Err(format!("read {read:?}, server {server_side:?}")),
        }
    }

    #[tokio::test]
    async fn only_the_pinned_client_certificate_gets_in() {
        let (pem, cert, key) = client_identity();
        let server = auto_mtls(&pem).unwrap();
        assert_eq!(exchange(&server, Some((cert, key))).await, Ok(42));
        let (_, other_cert, other_key) = client_identity();
        assert!(exchange(&server, Some((other_cert, other_key)))
            .await
            .is_err());
        assert!(exchange(&server, None).await.is_err());
    }
}
