//! Plugin mode: the binary as the Argo Rollouts controller starts it (magic cookie set).

use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::engine::{AddressPolicy, Engine};
use crate::goplugin::{check_cookie, serve, ServeOptions};
use crate::plugin::RollgatePlugin;
use crate::prometheus::{Backend, Client};
use crate::spec::check_address;

/// How long the exit waits for the runtime's threads once serving has ended.
const SHUTDOWN_WAIT: Duration = Duration::from_millis(200);

/// Arguments the controller passes from the `args` of the plugin's ConfigMap entry.
#[derive(Debug, Parser)]
#[command(name = "rollgate (plugin mode)", no_binary_name = false)]
pub struct PluginArgs {
    /// Log level (error, warn, info, debug, trace) or a tracing filter; also ROLLGATE_LOG.
    #[arg(long, env = "ROLLGATE_LOG", default_value = "info")]
    pub log_level: String,

    /// Prometheus address for metrics whose spec names none (else ROLLGATE_PROMETHEUS_ADDRESS).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// The go-plugin protocol: netrpc (the only one Argo Rollouts accepts) or grpc (for hosts
    /// whose AllowedProtocols include it); also ROLLGATE_PLUGIN_PROTOCOL.
    #[arg(long, env = "ROLLGATE_PLUGIN_PROTOCOL", value_enum, default_value_t = Protocol::Netrpc)]
    pub protocol: Protocol,
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
pub fn started_by_host() -> bool {
    std::env::var_os(crate::goplugin::COOKIE_KEY).is_some()
}

/// Serves the controller until it says Quit; returns the exit code.
pub fn run() -> u8 {
    if let Err(e) = check_cookie() {
        eprintln!("{e}");
        return 1;
    }
    // Nothing but the handshake may reach stdout, so argument errors go to stderr as text.
    let args = match PluginArgs::try_parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rollgate plugin: invalid arguments in the plugin's ConfigMap entry: {e}");
            return 1;
        }
    };
    crate::logging::init_plugin_logging(&args.log_level);
    let mut addresses = AddressPolicy::from_env();
    if let Some(url) = &args.prometheus {
        match check_address("--prometheus", url) {
            Ok(url) => addresses.default_address = Some(url),
            Err(e) => {
                eprintln!("rollgate plugin: {e}");
                return 1;
            }
        }
    }
    let engine = Arc::new(Engine::new(Backend::Live(Client::new()), addresses));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rollgate plugin: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let served = match args.protocol {
        Protocol::Netrpc => runtime
            .block_on(serve(
                Arc::new(RollgatePlugin::new(engine)),
                ServeOptions::from_env(),
            ))
            .map_err(|e| e.to_string()),
        Protocol::Grpc => runtime
            .block_on(crate::grpc::plugin_mode::serve(
                engine,
                crate::grpc::plugin_mode::PluginOptions::from_env(),
            ))
            .map_err(|e| e.to_string()),
    };
    // Calls still in flight are dropped; a worker busy in synchronous work (a large decode)
    // must not hold the exit, so the runtime is not waited for beyond this.
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
    match served {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %e, "plugin stopped");
            eprintln!("rollgate plugin: {e}");
            1
        }
    }
}
