//! The one reloadable source of the TLS certificate and the bearer token, shared by the HTTP
//! listener and the gRPC listener of `serve --grpc-listen`: a reload (SIGHUP or
//! `--reload-interval`) changes both at once, so the two ports never disagree on the token or
//! the certificate.

use std::path::Path;
use std::sync::Arc;

use super::auth::Auth;
use super::tls::{self, TlsFiles};
use super::ServeError;

/// The certificate (when TLS is on) and the token (when authentication is on) in use.
#[derive(Clone)]
pub(crate) struct Credentials {
    tls: Option<Arc<tls::Reloadable>>,
    auth: Arc<Auth>,
}

impl Credentials {
    /// Reads the TLS files and the token file now; either may be absent.
    pub(crate) fn load(
        tls: Option<TlsFiles>,
        token_file: Option<&Path>,
    ) -> Result<Credentials, ServeError> {
        let auth = match token_file {
            Some(file) => Auth::from_file(file)?,
            None => Auth::disabled(),
        };
        let tls = match tls {
            Some(files) => Some(Arc::new(tls::Reloadable::new(files)?)),
            None => None,
        };
        Ok(Credentials {
            tls,
            auth: Arc::new(auth),
        })
    }

    /// The token check (disabled when no token file was given).
    pub(crate) fn auth(&self) -> &Arc<Auth> {
        &self.auth
    }

    /// The reloadable certificate, when TLS is on.
    pub(crate) fn tls(&self) -> Option<Arc<tls::Reloadable>> {
        self.tls.clone()
    }

    /// Whether connections are TLS.
    pub(crate) fn has_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The acceptor for a new connection: the certificate of the latest successful reload.
    pub(crate) fn acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.tls.as_ref().map(|t| t.get())
    }

    /// Re-reads the token and the TLS files (blocking file I/O: call it off the async
    /// workers). Each keeps its old value when its new one is broken, and says so in the log.
    pub(crate) fn reload(&self) {
        if let Err(e) = self.auth.reload() {
            tracing::error!(error = %e, "auth token reload failed; the token in use stays");
        }
        if let Some(tls) = &self.tls {
            match tls.reload() {
                Ok(()) => tracing::info!("TLS certificate reloaded"),
                Err(e) => {
                    tracing::error!(error = %e, "TLS reload failed; the certificate in use stays")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reload_changes_the_token_and_the_certificate_for_every_holder() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, token) = (
            dir.path().join("c.pem"),
            dir.path().join("k.pem"),
            dir.path().join("token"),
        );
        let write_pair = || {
            let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
            std::fs::write(&cert, ck.cert.pem()).unwrap();
            std::fs::write(&key, ck.key_pair.serialize_pem()).unwrap();
        };
        write_pair();
        std::fs::write(&token, "one").unwrap();
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        };
        let http = Credentials::load(Some(files), Some(&token)).unwrap();
        let grpc = http.clone();
        let before = grpc.acceptor().unwrap();
        assert!(grpc.auth().check(Some(b"Bearer one")).is_ok());

        std::fs::write(&token, "two").unwrap();
        write_pair();
        http.reload();
        assert!(grpc.auth().check(Some(b"Bearer one")).is_err());
        assert!(grpc.auth().check(Some(b"Bearer two")).is_ok());
        let after = grpc.acceptor().unwrap();
        assert!(
            !Arc::ptr_eq(before.config(), after.config()),
            "the other holder sees the new certificate"
        );
    }
}
