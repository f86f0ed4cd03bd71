//! `rollgate serve`: the HTTP service for Flagger's webhooks and Argo's `web` provider.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use std::sync::Arc;

use crate::engine::{AddressPolicy, Engine, Trust};
use crate::grpc::remote::{Authenticate, RemoteOptions, TlsSource};
use crate::prometheus::{Backend, Client, Limits, Replay};
use crate::serve::auth::Auth;
use crate::serve::tls::TlsFiles;
use crate::serve::{Credentials, ServeConfig, Server, Settings};
use crate::spec::check_address;
use crate::spec::duration::parse_duration;

/// Arguments of `rollgate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port, printed in the "listening" log line).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,

    /// Directory of AnalysisTemplate / ClusterAnalysisTemplate YAML files that webhooks name
    /// with `template`; validated at start-up, re-read on SIGHUP (and see --reload-interval).
    #[arg(long, value_name = "DIR")]
    pub templates: Option<PathBuf>,

    /// Refuse to start while a template fails `rollgate lint` (without it, serve starts and
    /// `/readyz` answers 503 naming the errors until they are fixed).
    #[arg(long)]
    pub strict: bool,

    /// Prometheus address for specs that name none (else ROLLGATE_PROMETHEUS_ADDRESS).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// TLS certificate chain (PEM); needs --tls-key. Re-read on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// File holding the bearer token the analysis endpoints require (re-read on SIGHUP).
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// Time allowed for a verdict; the answer (503 when Prometheus is too slow) comes within
    /// it. Keep it under the caller's timeout (Flagger: 10s, Argo web: timeoutSeconds).
    #[arg(long, value_name = "DURATION", default_value = "8s", value_parser = parse_duration)]
    pub deadline: Duration,

    /// Time allowed to receive a request, headers and body (slower clients get 408).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Largest request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Also reload when the templates, the token file or the TLS files change, checking this
    /// often (e.g. 30s). Kubernetes updates mounted ConfigMaps and Secrets without a signal.
    /// Without it, reload with SIGHUP.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub reload_interval: Option<Duration>,

    /// After SIGTERM, how long requests in flight may take to finish.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Also serve the gRPC MetricProviderService here (health, reflection; the same TLS files and
    /// bearer token as the HTTP side).
    #[arg(long, value_name = "ADDR")]
    pub grpc_listen: Option<SocketAddr>,

    /// Accept only template names, not specs sent in requests.
    #[arg(long)]
    pub no_inline_specs: bool,

    /// Make /readyz also check that the default Prometheus answers.
    #[arg(long)]
    pub readyz_prometheus: bool,

    /// Answer queries from a recording (see `dry-run --record`) instead of Prometheus: for
    /// demos and benchmarks.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Largest Prometheus answer any spec may allow, in bytes; a spec's `maxResponseBytes`
    /// above it is refused, one without it gets this [default: 8 MiB].
    #[arg(long, value_name = "BYTES", env = "ROLLGATE_MAX_RESPONSE_BYTES")]
    pub max_response_bytes: Option<u64>,

    /// Bytes of Prometheus answers held at once across all requests (bodies and what they
    /// decode to); beyond it a query waits within its deadline, then is an Error (503)
    /// [default: 48 MiB].
    #[arg(long, value_name = "BYTES", env = "ROLLGATE_MAX_BUFFERED_BYTES")]
    pub max_buffered_bytes: Option<u64>,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

/// How `serve` writes its logs (always to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (`@level`, `@message`, `@timestamp`, fields).
    Json,
    /// Human-readable lines.
    Text,
}

/// The log filter for `serve`: the given one, with serve's own events (start-up, reloads,
/// access log) at info when the global level is coarser and no directive names
/// `rollgate::serve` itself (a directive for `rollgate::serve::access` still applies: it is more
/// specific).
fn log_filter(level: &str) -> String {
    let mut global = None;
    for directive in level.split(',').map(str::trim) {
        match directive.split_once('=') {
            Some((target, _)) if target.trim() == "rollgate::serve" => return level.to_string(),
            Some(_) => {}
            None if !directive.is_empty() => global = Some(directive.to_ascii_lowercase()),
            None => {}
        }
    }
    let coarse = global
        .as_deref()
        .is_none_or(|g| ["error", "warn", "off"].contains(&g));
    if coarse {
        format!("{level},rollgate::serve=info")
    } else {
        level.to_string()
    }
}

/// Runs the server until SIGTERM/SIGINT; returns the exit code (0 after a clean shutdown,
/// 1 when it could not start).
pub(crate) fn run(args: ServeArgs, log_level: &str) -> u8 {
    let filter = log_filter(log_level);
    // Held until the server has stopped: dropping it writes out the queued lines.
    let _log_writer =
        crate::logging::init_serve_logging(&filter, args.log_format == LogFormat::Json);
    match execute(args) {
        Ok(()) => 0,
        Err(message) => {
            tracing::error!(error = %message, "rollgate serve cannot start");
            eprintln!("rollgate serve: {message}");
            1
        }
    }
}

fn execute(args: ServeArgs) -> Result<(), String> {
    let mut addresses = AddressPolicy::from_env();
    if let Some(url) = &args.prometheus {
        addresses.default_address =
            Some(check_address("--prometheus", url).map_err(|e| e.to_string())?);
    }
    let readyz_prometheus = match (args.readyz_prometheus, &addresses.default_address) {
        (false, _) => None,
        (true, Some(a)) => Some(a.clone()),
        (true, None) => {
            return Err(
                "--readyz-prometheus needs a default Prometheus (--prometheus or ROLLGATE_PROMETHEUS_ADDRESS)"
                    .into(),
            )
        }
    };
    let limits = Limits::for_server(args.max_response_bytes, args.max_buffered_bytes);
    limits
        .check("--max-response-bytes, --max-buffered-bytes")
        .map_err(|e| e.to_string())?;
    let backend = match &args.replay {
        Some(path) => Backend::Replay(Replay::load(path).map_err(|e| e.to_string())?),
        None => Backend::Live(Client::with_limits(limits)),
    };
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let config = ServeConfig {
        listen: args.listen,
        templates_dir: args.templates,
        tls,
        auth_token_file: args.auth_token_file,
        shutdown_grace: args.shutdown_grace,
        reload_interval: args.reload_interval,
        strict: args.strict,
        engine: Engine::new(backend.clone(), addresses.clone()),
        settings: Settings {
            deadline: args.deadline,
            request_timeout: args.request_timeout,
            max_body_bytes: args.max_body_bytes,
            trust: Trust::network(!args.no_inline_specs),
            readyz_prometheus,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async {
        let server = Server::bind(config).await.map_err(|e| e.to_string())?;
        // One shutdown signal for both listeners.
        let shutdown = crate::shutdown::on_signals(crate::shutdown::Signals::TermAndInt)
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
        if let Some(addr) = args.grpc_listen {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot listen for gRPC on {addr}: {e}"))?;
            let engine =
                Engine::new(backend, addresses).with_query_observer(server.query_observer());
            let mut options = RemoteOptions {
                trust: Trust::network(!args.no_inline_specs),
                ..grpc_options(server.credentials(), args.shutdown_grace)
            };
            options.first_request_timeout = args.request_timeout;
            tracing::info!(addr = %addr, "gRPC listening");
            let stop = shutdown.clone();
            tokio::spawn(crate::grpc::remote::serve_remote(
                listener,
                Arc::new(engine),
                options,
                async move {
                    stop.wait().await;
                },
            ));
        }
        server.run(shutdown.wait()).await.map_err(|e| e.to_string())
    })?;
    // Connections still open after the grace period are closed with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

/// The gRPC side of `serve`: the HTTP side's certificate and token, followed through every
/// reload (the acceptor is asked for on each connection, the token on each call).
fn grpc_options(credentials: Credentials, shutdown_grace: Duration) -> RemoteOptions {
    let mut options = RemoteOptions {
        shutdown_grace,
        ..RemoteOptions::default()
    };
    if let Some(tls) = credentials.tls() {
        options.tls = Some(TlsSource::Reloading(Arc::new(move || tls.get())));
    }
    if credentials.auth().enabled() {
        options.auth = Some(Arc::new(GrpcAuth(credentials.auth().clone())));
    }
    options
}

/// The HTTP side's bearer token, checked on gRPC metadata.
struct GrpcAuth(Arc<Auth>);

impl Authenticate for GrpcAuth {
    fn authenticate(&self, authorization: Option<&[u8]>) -> Result<(), String> {
        self.0
            .check(authorization)
            .map_err(|r| r.reason().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_events_stay_visible_at_coarse_levels() {
        assert_eq!(log_filter("warn"), "warn,rollgate::serve=info");
        assert_eq!(log_filter("debug"), "debug");
        assert_eq!(
            log_filter("warn,rollgate::serve=warn"),
            "warn,rollgate::serve=warn"
        );
        assert_eq!(
            log_filter("warn,rollgate::serve::access=warn"),
            "warn,rollgate::serve::access=warn,rollgate::serve=info"
        );
        assert_eq!(log_filter("info,hyper=warn"), "info,hyper=warn");
    }
}
