//! Errors for invalid specs: each names the key path and what was expected.

use thiserror::Error;

/// A spec that cannot be used, with the key it is about.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// A key holds a value of the wrong kind or out of range.
    #[error("{path}: expected {expected}, got {got}")]
    Invalid {
        /// The key path, e.g. `prometheus.timeout`.
        path: String,
        /// What the key takes.
        expected: String,
        /// A short rendering of what it holds.
        got: String,
    },
    /// A required key is absent.
    #[error("{path}: is required ({hint})")]
    Missing {
        /// The key path, e.g. `prometheus.timeout`.
        path: String,
        /// What the key is for.
        hint: String,
    },
    /// A key rollgate does not know (usually a typo).
    #[error("{path}: unknown key{}", suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default())]
    Unknown {
        /// The key path, e.g. `prometheus.timeout`.
        path: String,
        /// The known key it most resembles.
        suggestion: Option<String>,
    },
    /// Keys that exclude each other, or other rules across keys.
    #[error("{path}: {message}")]
    Conflict {
        /// The key path, e.g. `prometheus.timeout`.
        path: String,
        /// The rule that is broken.
        message: String,
    },
    /// The document is not YAML/JSON at all.
    #[error("{source_name}: {message}")]
    Syntax {
        /// The file or request the document came from.
        source_name: String,
        /// The parser's message.
        message: String,
    },
}

impl SpecError {
    /// The key path the error is about (empty for whole-document errors).
    pub fn path(&self) -> &str {
        match self {
            SpecError::Invalid { path, .. }
            | SpecError::Missing { path, .. }
            | SpecError::Unknown { path, .. }
            | SpecError::Conflict { path, .. } => path,
            SpecError::Syntax { .. } => "",
        }
    }
}

/// The start of a long text, for messages.
pub(crate) fn shorten(text: &str) -> String {
    if text.chars().count() > 120 {
        let cut: String = text.chars().take(117).collect();
        format!("{cut}...")
    } else {
        text.to_string()
    }
}
