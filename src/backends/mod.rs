//! Metric backends beside Prometheus: Datadog, CloudWatch, New Relic, Graphite and InfluxDB.
//!
//! A metric names exactly one backend block (`prometheus:` or one of these). Each backend here
//! reads its block ([`BackendConfig::read`]), sends its own API's queries through the shared
//! client (`prometheus::Client::send_api`: connections, limits, retries, scrubbing) and turns
//! the answer into the engine's data model (`QueryData`: one number per series for a check,
//! series over time for a range), with the `result` its Argo Rollouts provider would give the
//! conditions ([`crate::prometheus::Shaped`]). The engine's rules (guard, no data, compare)
//! then work the same on every backend.

pub mod cloudwatch;
pub mod datadog;
pub mod graphite;
pub mod influxdb;
pub mod newrelic;

use std::path::Path;

use tokio::time::Instant;

use crate::prometheus::{Client, PrometheusError, QueryRequest, QueryResponse};
use crate::spec::reader::ObjectReader;
use crate::spec::SpecError;

/// The keys of the backend blocks besides `prometheus`, as written in a spec.
pub const BACKEND_KEYS: [&str; 5] = ["datadog", "cloudwatch", "newrelic", "graphite", "influxdb"];

/// Checks a query in the language of backend `key` as far as rollgate can without the server,
/// so that `rollgate lint` and serve's readiness find what the server would refuse: CloudWatch's
/// query list, InfluxDB's one read-only `SELECT`, Graphite's render parameters. (Datadog's and
/// New Relic's languages are left to their servers.) The error says what is wrong.
pub(crate) fn check_query(key: &str, query: &str) -> Result<(), String> {
    match key {
        // The period only fills queries that set none; any valid one checks the text.
        "cloudwatch" => cloudwatch::metric_data_queries(query, 60).map(drop),
        "influxdb" => influxdb::check_statement(query),
        "graphite" => graphite::render_params(query)
            .map(drop)
            .map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// A self-hosted backend's address: an `http(s)://` URL with a host ([`crate::spec::check_address`]),
/// and without userinfo (credentials go in files: `credentials` says which keys), query or
/// fragment (the API's path is appended).
pub(crate) fn check_plain_address(
    path: &str,
    address: &str,
    credentials: &str,
) -> Result<String, SpecError> {
    let address = crate::spec::check_address(path, address)?;
    let invalid = |expected: String| SpecError::Invalid {
        path: path.to_string(),
        expected,
        got: format!("{:?}", crate::prometheus::redact_url(&address)),
    };
    // Parsed by check_address just now.
    let Ok(url) = url::Url::parse(&address) else {
        return Err(invalid("an http:// or https:// URL".into()));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(format!(
            "a URL without user:password@ ({credentials})"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("a URL without ?query or #fragment".into()));
    }
    Ok(address)
}

/// Further attempts after a connection failure, a timeout, 502–504 or a 429 whose reset fits
/// the check's time, unless a block's `retries` says otherwise (as the prometheus block).
pub(crate) const DEFAULT_RETRIES: u32 = 2;

/// Reads the keys every backend block shares — `timeout` (above zero; else `default_timeout`,
/// which each backend takes from its Argo provider's client), `retries` (0–10) and
/// `maxResponseBytes` — as (timeout, retries, maxResponseBytes).
pub(crate) fn read_sending(
    block: &mut ObjectReader<'_>,
    default_timeout: std::time::Duration,
) -> Result<(std::time::Duration, u32, Option<u64>), SpecError> {
    let timeout = match block.duration("timeout")? {
        Some(t) if t.is_zero() => {
            return Err(SpecError::Invalid {
                path: block.path_of("timeout"),
                expected: "a duration above zero".into(),
                got: "0".into(),
            })
        }
        Some(t) => t,
        None => default_timeout,
    };
    let retries = match block.integer("retries", 0, 10)? {
        // 0..=10, checked by the reader.
        Some(r) => u32::try_from(r).unwrap_or(10),
        None => DEFAULT_RETRIES,
    };
    let max_response_bytes = block.integer("maxResponseBytes", 1024, 1 << 34)?;
    Ok((timeout, retries, max_response_bytes))
}

/// A metric's backend other than Prometheus, with its configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendConfig {
    /// `datadog:`.
    Datadog(datadog::DatadogConfig),
    /// `cloudwatch:`.
    CloudWatch(cloudwatch::CloudWatchConfig),
    /// `newrelic:`.
    NewRelic(newrelic::NewRelicConfig),
    /// `graphite:`.
    Graphite(graphite::GraphiteConfig),
    /// `influxdb:`.
    InfluxDb(influxdb::InfluxDbConfig),
}

impl BackendConfig {
    /// Reads the block under `key` (one of [`BACKEND_KEYS`]).
    pub(crate) fn read(key: &str, block: ObjectReader<'_>) -> Result<BackendConfig, SpecError> {
        Ok(match key {
            "datadog" => BackendConfig::Datadog(datadog::DatadogConfig::read(block)?),
            "cloudwatch" => BackendConfig::CloudWatch(cloudwatch::CloudWatchConfig::read(block)?),
            "newrelic" => BackendConfig::NewRelic(newrelic::NewRelicConfig::read(block)?),
            "graphite" => BackendConfig::Graphite(graphite::GraphiteConfig::read(block)?),
            _ => BackendConfig::InfluxDb(influxdb::InfluxDbConfig::read(block)?),
        })
    }

    /// The block's key in a spec (`datadog`, …).
    pub fn key(&self) -> &'static str {
        match self {
            BackendConfig::Datadog(_) => "datadog",
            BackendConfig::CloudWatch(_) => "cloudwatch",
            BackendConfig::NewRelic(_) => "newrelic",
            BackendConfig::Graphite(_) => "graphite",
            BackendConfig::InfluxDb(_) => "influxdb",
        }
    }

    /// The backend's name in messages (`Datadog`, …).
    pub fn name(&self) -> &'static str {
        match self {
            BackendConfig::Datadog(_) => "Datadog",
            BackendConfig::CloudWatch(_) => "CloudWatch",
            BackendConfig::NewRelic(_) => "New Relic",
            BackendConfig::Graphite(_) => "Graphite",
            BackendConfig::InfluxDb(_) => "InfluxDB",
        }
    }

    /// Where queries go, without userinfo (messages, the open-ended detectors' identity).
    pub fn address(&self) -> String {
        let address = match self {
            BackendConfig::Datadog(c) => c.address(),
            BackendConfig::CloudWatch(c) => c.address(),
            BackendConfig::NewRelic(c) => c.address(),
            BackendConfig::Graphite(c) => c.address(),
            BackendConfig::InfluxDb(c) => c.address(),
        };
        crate::prometheus::redact_url(&address)
    }

    /// Every file on this machine the block reads (credentials, CA), with its key including
    /// the block's (`datadog.apiKeyFile`): specs that arrive over the network may name none.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        match self {
            BackendConfig::Datadog(c) => c.files(),
            BackendConfig::CloudWatch(c) => c.files(),
            BackendConfig::NewRelic(c) => c.files(),
            BackendConfig::Graphite(c) => c.files(),
            BackendConfig::InfluxDb(c) => c.files(),
        }
    }

    /// Whether the block signs with this machine's AWS credentials, and the profile it names.
    pub fn aws_credentials(&self) -> Option<Option<&str>> {
        match self {
            BackendConfig::CloudWatch(c) => Some(c.aws_profile()),
            _ => None,
        }
    }

    /// Runs one query (an instant check at `time`, or a range for the distribution form and
    /// backtests) through `client`, within `deadline`.
    pub(crate) async fn query(
        &self,
        client: &Client,
        request: &QueryRequest,
        deadline: Option<Instant>,
    ) -> Result<QueryResponse, PrometheusError> {
        match self {
            BackendConfig::Datadog(c) => datadog::query(client, c, request, deadline).await,
            BackendConfig::CloudWatch(c) => cloudwatch::query(client, c, request, deadline).await,
            BackendConfig::NewRelic(c) => newrelic::query(client, c, request, deadline).await,
            BackendConfig::Graphite(c) => graphite::query(client, c, request, deadline).await,
            BackendConfig::InfluxDb(c) => influxdb::query(client, c, request, deadline).await,
        }
    }
}
