//! Optional bearer-token authentication of the analysis endpoints (`--auth-token-file`).
//!
//! The token is read at start-up and on every reload (SIGHUP), compared in constant time, and
//! never logged, echoed or shown by `Debug`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use thiserror::Error;

/// The expected token. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(Arc<Vec<u8>>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why the token file cannot be used (its content never appears here).
#[derive(Debug, Error)]
pub(crate) enum AuthError {
    /// The file cannot be read.
    #[error("cannot read the auth token file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is empty or only whitespace.
    #[error("the auth token file {path} is empty")]
    Empty { path: PathBuf },
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A bearer token that is not the expected one.
    Invalid,
}

impl Refusal {
    /// The reason given to the client (never the token).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::Missing => {
                "missing bearer token: send the header `Authorization: Bearer <token>` (Flagger webhooks: metadata `token`)"
            }
            Refusal::Invalid => "invalid bearer token",
        }
    }
}

/// Reads a token file: its content, trimmed of surrounding whitespace (a trailing newline is
/// what `kubectl create secret --from-file` and editors leave).
pub(crate) fn read_token(path: &Path) -> Result<Token, AuthError> {
    let raw = std::fs::read(path).map_err(|source| AuthError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let trimmed = raw.trim_ascii();
    if trimmed.is_empty() {
        return Err(AuthError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(Token(Arc::new(trimmed.to_vec())))
}

/// The authentication state of a server: off, or the token in use.
#[derive(Debug)]
pub(crate) struct Auth {
    file: Option<PathBuf>,
    token: RwLock<Option<Token>>,
}

impl Auth {
    /// No authentication.
    pub(crate) fn disabled() -> Auth {
        Auth {
            file: None,
            token: RwLock::new(None),
        }
    }

    /// Authentication with the token in `file`, read now.
    pub(crate) fn from_file(file: &Path) -> Result<Auth, AuthError> {
        let token = read_token(file)?;
        Ok(Auth {
            file: Some(file.to_path_buf()),
            token: RwLock::new(Some(token)),
        })
    }

    /// Whether requests must carry a token.
    pub(crate) fn enabled(&self) -> bool {
        self.file.is_some()
    }

    /// Re-reads the token file (for a rotated secret); on failure the old token stays.
    pub(crate) fn reload(&self) -> Result<(), AuthError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let token = read_token(file)?;
        match self.token.write() {
            Ok(mut guard) => *guard = Some(token),
            Err(poisoned) => *poisoned.into_inner() = Some(token),
        }
        Ok(())
    }

    /// Checks an `Authorization` header value against the token.
    pub(crate) fn check(&self, authorization: Option<&[u8]>) -> Result<(), Refusal> {
        self.check_token(authorization.and_then(bearer_token))
    }

    /// Checks a token presented some other way (Flagger cannot send headers, so its webhooks
    /// carry the token in their metadata).
    pub(crate) fn check_token(&self, presented: Option<&[u8]>) -> Result<(), Refusal> {
        let expected = match self.token.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let Some(expected) = expected else {
            return Ok(());
        };
        let presented = presented
            .map(<[u8]>::trim_ascii)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::Missing)?;
        if constant_time_eq(presented, &expected.0) {
            Ok(())
        } else {
            Err(Refusal::Invalid)
        }
    }
}

/// Shared with the gRPC endpoint's authentication (moved to [`crate::auth`], re-exported here).
pub(crate) use crate::auth::{bearer_token, constant_time_eq};

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_with(token: &str) -> (tempfile::TempDir, Auth) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, format!("{token}\n")).unwrap();
        let auth = Auth::from_file(&path).unwrap();
        (dir, auth)
    }

    #[test]
    fn accepts_only_the_exact_bearer_token() {
        let (_dir, auth) = auth_with("s3cret-token");
        assert_eq!(auth.check(Some(b"Bearer s3cret-token")), Ok(()));
        assert_eq!(auth.check(Some(b"bearer  s3cret-token ")), Ok(()));
        assert_eq!(auth.check(None), Err(Refusal::Missing));
        assert_eq!(
            auth.check(Some(b"Basic s3cret-token")),
            Err(Refusal::Missing)
        );
        assert_eq!(auth.check(Some(b"Bearer ")), Err(Refusal::Missing));
        assert_eq!(
            auth.check(Some(b"Bearer s3cret-toke")),
            Err(Refusal::Invalid)
        );
        assert_eq!(
            auth.check(Some(b"Bearer s3cret-token2")),
            Err(Refusal::Invalid)
        );
        assert_eq!(
            auth.check(Some(b"Bearer S3cret-token")),
            Err(Refusal::Invalid)
        );
    }

    #[test]
    fn tokens_from_elsewhere_are_compared_the_same_way() {
        let (_dir, auth) = auth_with("s3cret-token");
        assert_eq!(auth.check_token(Some(b"s3cret-token")), Ok(()));
        assert_eq!(auth.check_token(Some(b" s3cret-token\n")), Ok(()));
        assert_eq!(auth.check_token(None), Err(Refusal::Missing));
        assert_eq!(auth.check_token(Some(b"  ")), Err(Refusal::Missing));
        assert_eq!(auth.check_token(Some(b"other")), Err(Refusal::Invalid));
    }

    #[test]
    fn disabled_accepts_everything() {
        let auth = Auth::disabled();
        assert!(!auth.enabled());
        assert_eq!(auth.check(None), Ok(()));
    }

    #[test]
    fn token_never_shows_in_debug_or_errors() {
        let (dir, auth) = auth_with("s3cret-token");
        let debug = format!("{auth:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        std::fs::write(dir.path().join("token"), " \n").unwrap();
        let err = auth.reload().unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
        // The old token stays after a failed reload.
        assert_eq!(auth.check(Some(b"Bearer s3cret-token")), Ok(()));
        std::fs::write(dir.path().join("token"), "rotated").unwrap();
        auth.reload().unwrap();
        assert_eq!(auth.check(Some(b"Bearer rotated")), Ok(()));
        assert_eq!(
            auth.check(Some(b"Bearer s3cret-token")),
            Err(Refusal::Invalid)
        );
    }

    #[test]
    fn constant_time_eq_compares_whole_values() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abc\0"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
