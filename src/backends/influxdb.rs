//! InfluxDB: PLACEHOLDER until the InfluxDB backend lands (replace this whole file; keep the
//! signatures that `backends/mod.rs` calls).

use std::path::Path;

use tokio::time::Instant;

use crate::prometheus::{Client, PrometheusError, QueryRequest, QueryResponse};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// The `influxdb:` block.
#[derive(Debug, Clone, PartialEq)]
pub struct InfluxDbConfig {
    address: String,
}

impl InfluxDbConfig {
    /// Reads the block.
    pub(crate) fn read(mut block: ObjectReader<'_>) -> Result<InfluxDbConfig, SpecError> {
        let address = block.string("address")?.unwrap_or_default();
        block.finish()?;
        Ok(InfluxDbConfig { address })
    }

    /// Where queries go.
    pub fn address(&self) -> String {
        self.address.clone()
    }

    /// The files the block reads, with their keys.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        Vec::new()
    }
}

/// Runs one query.
pub(crate) async fn query(
    _client: &Client,
    _cfg: &InfluxDbConfig,
    _request: &QueryRequest,
    _deadline: Option<Instant>,
) -> Result<QueryResponse, PrometheusError> {
    Err(PrometheusError::Config(
        "the influxdb backend is not built yet".into(),
    ))
}
