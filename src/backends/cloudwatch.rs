//! CloudWatch: PLACEHOLDER until the CloudWatch backend lands (replace this whole file; keep the
//! signatures that `backends/mod.rs` calls).

use std::path::Path;

use tokio::time::Instant;

use crate::prometheus::{Client, PrometheusError, QueryRequest, QueryResponse};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// The `cloudwatch:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct CloudWatchConfig {
    address: String,
}

impl CloudWatchConfig {
    /// Reads the block.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<CloudWatchConfig, SpecError> {
        let address = block.string("address")?.unwrap_or_default();
        block.finish()?;
        Ok(CloudWatchConfig { address })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }

    /// The AWS profile the block names, if any (it always signs with AWS credentials).
    pub fn aws_profile(&self) -> Option<&str> {
        None
    }
}

/// Runs one query.
pub(crate) async fn query(
    _client: &Client,
    _cfg: &CloudWatchConfig,
    _request: &QueryRequest,
    _deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    Err(PrometheusError::Config(
        "the cloudwatch backend is not built yet".into(),
    ))
}
