//! TLS for `serve` from PEM certificate and key files (`--tls-cert`, `--tls-key`), re-read on
//! SIGHUP so a renewed certificate needs no restart. rustls with the `ring` provider.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The certificate chain and private key files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why TLS cannot be set up (key material never appears here).
#[derive(Debug, Error)]
pub(crate) enum TlsError {
    /// The certificate file cannot be read or parsed.
    #[error("certificate file {path}: {message}")]
    Certificate { path: PathBuf, message: String },
    /// The key file cannot be read or parsed.
    #[error("private key file {path}: {message}")]
    Key { path: PathBuf, message: String },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("cannot use the certificate and key: {0}")]
    Config(String),
}

fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let fail = |message: String| TlsError::Certificate {
        path: path.to_path_buf(),
        message,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(e.to_string()))?;
    if certs.is_empty() {
        return Err(fail("no PEM CERTIFICATE block found".into()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Key {
        path: path.to_path_buf(),
        // The parser's messages name the PEM section, never its content.
        message: e.to_string(),
    })
}

/// Builds an acceptor offering HTTP/2 and HTTP/1.1 (ALPN).
pub(crate) fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let certs = read_certificates(&files.cert)?;
    let key = read_key(&files.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The acceptor in use, replaced on reload.
pub(crate) struct Reloadable {
    files: TlsFiles,
    current: RwLock<TlsAcceptor>,
}

impl Reloadable {
    /// Reads the files now.
    pub(crate) fn new(files: TlsFiles) -> Result<Reloadable, TlsError> {
        let current = RwLock::new(acceptor(&files)?);
        Ok(Reloadable { files, current })
    }

    /// The acceptor for a new connection.
    pub(crate) fn get(&self) -> TlsAcceptor {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the files; on failure the old certificate stays in use.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let fresh = acceptor(&self.files)?;
        match self.current.write() {
            Ok(mut guard) => *guard = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        std::fs::write(dir.join("c.pem"), cert).unwrap();
        std::fs::write(dir.join("k.pem"), key).unwrap();
        TlsFiles {
            cert: dir.join("c.pem"),
            key: dir.join("k.pem"),
        }
    }

    #[test]
    fn loads_a_generated_pair_and_rejects_broken_files() {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (ck.cert.pem(), ck.key_pair.serialize_pem());
        let dir = tempfile::tempdir().unwrap();
        let good = files(dir.path(), &cert, &key);
        let r = Reloadable::new(good).unwrap();

        let e = acceptor(&files(dir.path(), "nothing", &key)).err().unwrap();
        assert!(matches!(e, TlsError::Certificate { .. }), "{e}");
        let e = acceptor(&files(dir.path(), &cert, "nothing"))
            .err()
            .unwrap();
        assert!(matches!(e, TlsError::Key { .. }), "{e}");
        // A key that does not belong to the certificate.
        let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        let e = acceptor(&files(dir.path(), &cert, &other.key_pair.serialize_pem()))
            .err()
            .unwrap();
        assert!(matches!(e, TlsError::Config(_)), "{e}");
        // The files are broken now: a reload fails and keeps the old acceptor.
        assert!(r.reload().is_err());
        let _still = r.get();
    }
}
