//! The `fleet` kind (SPEC.md 2.2): the fleet-inventory gate.

use serde_json::Value;

use super::error::SpecError;

/// A validated `fleet:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {}

impl FleetSpec {
    /// Reads and validates a `fleet:` block at `path`.
    pub fn from_value(_value: &Value, path: &str) -> Result<FleetSpec, SpecError> {
        Err(SpecError::Conflict {
            path: path.to_string(),
            message: "the fleet kind is not available in this build yet".into(),
        })
    }
}
