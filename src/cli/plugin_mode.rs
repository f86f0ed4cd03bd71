//! Plugin mode: the binary as the Argo Rollouts controller starts it (magic cookie set).

use std::sync::Arc;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, ValueEnum};
use tracing_subscriber::EnvFilter;

use crate::argo::{ArgoProvider, MEASUREMENT_BUDGET};
use crate::engine::{AddressPolicy, Engine, Trust};
use crate::goplugin::{serve, ServeOptions};
use crate::plugin_host::check_cookie;
use crate::prometheus::{Backend, Client, Limits};
use crate::shutdown::Signals;
use crate::spec::check_address;

/// How long the exit waits for the runtime's threads once serving has ended.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(200);

/// Arguments the controller passes from the `args` of the plugin's ConfigMap entry (Argo
/// Rollouts v1.7 and later); each can also be set by environment, which every version passes
/// on to the plugin.
#[derive(Debug, Parser)]
#[command(name = "rollgate (plugin mode)", no_binary_name = false)]
pub struct PluginArgs {
    /// Log level (error, warn, info, debug, trace) or directives like `info,rollgate=debug`;
    /// also ROLLGATE_LOG. Anything else is refused.
    #[arg(long, env = "ROLLGATE_LOG", default_value = "info")]
    pub log_level: String,

    /// Prometheus address for metrics whose spec names none; also ROLLGATE_PROMETHEUS_ADDRESS.
    #[arg(long, value_name = "URL", env = crate::engine::ADDRESS_ENV)]
    pub prometheus: Option<String>,

    /// The go-plugin protocol: netrpc (the only one Argo Rollouts accepts) or grpc (for hosts
    /// whose AllowedProtocols include it); also ROLLGATE_PLUGIN_PROTOCOL.
    #[arg(long, env = "ROLLGATE_PLUGIN_PROTOCOL", value_enum, default_value_t = Protocol::Netrpc)]
    pub protocol: Protocol,

    /// Largest Prometheus answer any AnalysisTemplate may allow, in bytes (default 8 MiB); a
    /// `maxResponseBytes` above it is an Error; also ROLLGATE_MAX_RESPONSE_BYTES.
    #[arg(long, value_name = "BYTES", env = "ROLLGATE_MAX_RESPONSE_BYTES")]
    pub max_response_bytes: Option<u64>,

    /// Bytes of Prometheus answers held at once across all measurements (default 48 MiB);
    /// also ROLLGATE_MAX_BUFFERED_BYTES.
    #[arg(long, value_name = "BYTES", env = "ROLLGATE_MAX_BUFFERED_BYTES")]
    pub max_buffered_bytes: Option<u64>,
    /// A directory whose files specs may name as credentials (`bearerTokenFile`,
    /// `basicAuth.passwordFile`, `caFile`); repeatable. Without one no such file is read: a
    /// template author must not have the controller's own secrets (its service-account token)
    /// sent to an address of theirs. Also ROLLGATE_ALLOW_CREDENTIAL_DIRS (colon-separated).
    #[arg(
        long = "allow-credential-dir",
        value_name = "DIR",
        env = "ROLLGATE_ALLOW_CREDENTIAL_DIRS",
        value_delimiter = ':'
    )]
    pub allow_credential_dirs: Vec<std::path::PathBuf>,
}

/// The go-plugin protocol served in plugin mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// Go's net/rpc over yamux.
    Netrpc,
    /// gRPC (`rollgate.v1.MetricProviderService`), with AutoMTLS when the host asks for it.
    Grpc,
}

/// Whether the process was started by a plugin host (the cookie's key is present at all).
pub(crate) fn started_by_host() -> bool {
    std::env::var_os(crate::plugin_host::COOKIE_KEY).is_some()
}

/// Where an argument's value came from, for messages: the flag or its environment variable.
fn source(matches: &ArgMatches, id: &str, flag: &str, env: &str) -> String {
    match matches.value_source(id) {
        Some(ValueSource::EnvVariable) => env.to_string(),
        _ => flag.to_string(),
    }
}

/// clap's error without its usage and help hint (the controller's user cannot run --help):
/// the error line and any tip, on one line.
fn clap_summary(e: &clap::Error) -> String {
    e.render()
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
        })
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads and checks the arguments and environment; the error is the message to report.
fn configure() -> Result<(PluginArgs, EnvFilter, AddressPolicy, Trust), String> {
    let matches = PluginArgs::command().try_get_matches().map_err(|e| {
        format!(
            "rollgate plugin: invalid arguments in the plugin's ConfigMap entry or ROLLGATE_* \
             environment: {}; accepted: --log-level, --prometheus, --protocol, --max-response-bytes, \
             --max-buffered-bytes, --allow-credential-dir",
            clap_summary(&e)
        )
    })?;
    let args = PluginArgs::from_arg_matches(&matches)
        .map_err(|e| format!("rollgate plugin: invalid arguments: {}", e.render()))?;
    let level_source = source(&matches, "log_level", "--log-level", "ROLLGATE_LOG");
    let filter = crate::logging::plugin_log_filter(&args.log_level, &level_source)
        .map_err(|e| format!("rollgate plugin: {e}"))?;
    let mut addresses = AddressPolicy {
        override_address: None,
        default_address: None,
    };
    if let Some(url) = args.prometheus.as_deref().filter(|u| !u.trim().is_empty()) {
        let from = source(
            &matches,
            "prometheus",
            "--prometheus",
            crate::engine::ADDRESS_ENV,
        );
        addresses.default_address =
            Some(check_address(&from, url).map_err(|e| format!("rollgate plugin: {e}"))?);
    }
    Limits::for_server(args.max_response_bytes, args.max_buffered_bytes)
        .check("--max-response-bytes, --max-buffered-bytes")
        .map_err(|e| format!("rollgate plugin: {e}"))?;
    let trust =
        Trust::plugin(&args.allow_credential_dirs).map_err(|e| format!("rollgate plugin: {e}"))?;
    Ok((args, filter, addresses, trust))
}

/// Serves the controller until it says Quit; returns the exit code. Every start-up failure is
/// one hclog JSON line at `error` on stderr, which the controller logs at error level.
pub(crate) fn run() -> u8 {
    if let Err(e) = check_cookie() {
        crate::logging::report_startup_error(&e.to_string());
        return 1;
    }
    // Nothing but the handshake may reach stdout.
    let (args, filter, addresses, trust) = match configure() {
        Ok(c) => c,
        Err(message) => {
            crate::logging::report_startup_error(&message);
            return 1;
        }
    };
    crate::logging::init_hclog_logging(filter);
    let limits = Limits::for_server(args.max_response_bytes, args.max_buffered_bytes);
    let engine = Arc::new(Engine::new(
        Backend::Live(Client::with_limits(limits)),
        addresses,
    ));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::logging::report_startup_error(&format!(
                "rollgate plugin: cannot start the async runtime: {e}"
            ));
            return 1;
        }
    };
    // One shutdown for whichever server runs: SIGTERM ends it, SIGINT is ignored as go-plugin
    // plugins do (on a thread of its own, before the socket exists).
    let shutdown = crate::shutdown::on_signals(Signals::TermOnly);
    let served = match shutdown {
        Err(e) => Err(crate::plugin_host::HostError::Signal(e).to_string()),
        Ok(shutdown) => match args.protocol {
            Protocol::Netrpc => runtime
                .block_on(serve(
                    Arc::new(ArgoProvider::new(engine, trust, MEASUREMENT_BUDGET)),
                    ServeOptions::from_env(),
                    shutdown,
                ))
                .map_err(|e| e.to_string()),
            Protocol::Grpc => runtime
                .block_on(crate::grpc::plugin_mode::serve(
                    engine,
                    crate::grpc::plugin_mode::PluginOptions {
                        trust,
                        ..crate::grpc::plugin_mode::PluginOptions::from_env()
                    },
                    shutdown,
                ))
                .map_err(|e| e.to_string()),
        },
    };
    // Calls still in flight are dropped; a worker busy in synchronous work (a large decode)
    // must not hold the exit, so the runtime is not waited for beyond this.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    match served {
        Ok(()) => 0,
        Err(e) => {
            crate::logging::report_startup_error(&format!("rollgate plugin: {e}"));
            1
        }
    }
}
