//! The command line: argument parsing and the subcommands, thin over the engine.

mod backtest;
mod backtest_plot;
mod backtest_releases;
mod dashboard;
mod dry_run;
mod fleet;
mod lint;
mod output;
mod plugin_mode;
mod rules;
mod serve;
mod stdout;

pub use plugin_mode::PluginArgs;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use backtest::BacktestArgs;
pub use dry_run::DryRunArgs;
pub use lint::{LintArgs, LintFormat};
pub use serve::ServeArgs;

/// Exit codes of `dry-run` (and of other verdict-printing commands).
pub(crate) mod exit {
    pub(crate) const SUCCESSFUL: u8 = 0;
    pub(crate) const FAILED: u8 = 1;
    pub(crate) const INCONCLUSIVE: u8 = 2;
    pub(crate) const ERROR: u8 = 3;
    /// A command line that cannot run (unknown flag, bad value, missing argument, unreadable
    /// path): BSD's EX_USAGE, a code no verdict uses, so a script can tell "bad flag" from
    /// "canary failed".
    pub(crate) const USAGE: u8 = 64;
}

/// rollgate judges progressive deliveries: an Argo Rollouts metric plugin, a Flagger webhook,
/// and dry runs of AnalysisTemplates from a terminal.
#[derive(Debug, Parser)]
#[command(
    name = "rollgate",
    // The commit too (build.rs): two builds that print the same line are the same source.
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("ROLLGATE_COMMIT"), ")"),
    about,
    long_about = None,
    arg_required_else_help = true,
    after_help = "Started by the Argo Rollouts controller (ARGO_ROLLOUTS_RPC_PLUGIN=metricprovider), rollgate serves as its metric plugin instead; see README.md, \"Use with Argo Rollouts\"."
)]
pub struct Cli {
    /// Log level (error, warn, info, debug, trace) or a tracing filter (`rollgate=debug,warn`);
    /// also ROLLGATE_LOG.
    #[arg(long, global = true, env = "ROLLGATE_LOG", default_value = "warn", value_parser = parse_log_level)]
    pub log_level: String,

    // Not a doc comment: clap would read it as help text.
    #[allow(missing_docs)]
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate every metric of an AnalysisTemplate once and print the verdict.
    ///
    /// Exit codes: 0 Successful, 1 Failed, 2 Inconclusive (or still waiting), 3 Error or invalid spec.
    DryRun(DryRunArgs),
    /// Replay an AnalysisTemplate over a past window as one Argo AnalysisRun (see docs/backtest.md).
    ///
    /// Exit codes as dry-run, for the run's phase: 0 Successful, 1 Failed, 2 Inconclusive, 3 Error.
    Backtest(BacktestArgs),
    /// Serve Flagger webhooks and Argo's web provider over HTTP (see docs/serve.md).
    Serve(ServeArgs),
    /// Print PrometheusRules (recording rules and alerts) for every metric of an AnalysisTemplate (see docs/rules.md).
    Rules(rules::RulesArgs),
    /// Fleet promotion from a terminal: `plan` (cohorts and targets) and `versions` (the matrix).
    Fleet(fleet::FleetArgs),
    /// Print a Grafana dashboard (JSON) of every metric of an AnalysisTemplate (see docs/rules.md).
    Dashboard(dashboard::DashboardArgs),
    /// Check template files without a Prometheus: every problem of every template at once.
    ///
    /// Exit codes: 0 no errors (warnings allowed), 1 errors found, 64 usage error.
    Lint(LintArgs),
}

/// The five levels, and tracing filters (`rollgate=debug`, `warn,hyper=off`), which hold `=` or
/// `,`. A bare word is a level: tracing would read `loud` as a target name and log nothing.
fn parse_log_level(s: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];
    let word = s.trim().to_ascii_lowercase();
    if LEVELS.contains(&word.as_str()) || s.contains(['=', ',']) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "expected one of error, warn, info, debug, trace (or a tracing filter such as rollgate=debug), got {s:?}"
        ))
    }
}

/// Entry point of the binary: parses arguments, runs the command, returns its exit code.
pub fn main() -> ExitCode {
    if plugin_mode::started_by_host() {
        return ExitCode::from(plugin_mode::run());
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with success; usage errors and a bare `rollgate`
            // (help shown because no subcommand was given) exit 64, never waiting for input:
            // 1 to 3 are verdicts.
            let _ = e.print();
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(exit::USAGE),
            };
        }
    };
    // `serve` sets up its own (JSON) logging.
    if !matches!(cli.command, Command::Serve(_)) {
        crate::logging::init_cli_logging(&cli.log_level);
    }
    match cli.command {
        Command::DryRun(args) => ExitCode::from(dry_run::run(args)),
        Command::Backtest(args) => ExitCode::from(backtest::run(args)),
        Command::Serve(args) => ExitCode::from(serve::run(args, &cli.log_level)),
        Command::Rules(args) => ExitCode::from(rules::run(args)),
        Command::Fleet(args) => ExitCode::from(fleet::run(args)),
        Command::Dashboard(args) => ExitCode::from(dashboard::run(args)),
        Command::Lint(args) => ExitCode::from(lint::run(args)),
    }
}

/// The templates of `file` and its name for messages, with every `--arg` name checked against
/// the arguments they declare (an undeclared one is a usage error naming the declared ones).
fn read_templates(
    file: &std::path::Path,
    args: &[(String, String)],
) -> Result<(String, Vec<crate::spec::Template>), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let source = file.display().to_string();
    let templates =
        crate::spec::Template::parse_all(&text, &source).map_err(|e| format!("{source}: {e}"))?;
    crate::spec::check_declared(
        templates
            .iter()
            .flat_map(|t| t.args.keys().map(String::as_str)),
        args.iter().map(|(k, _)| k.as_str()),
    )
    .map_err(|e| format!("{source}: --arg {e}"))?;
    Ok((source, templates))
}
