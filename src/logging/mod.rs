//! Logging setup: hclog-style JSON lines on stderr in plugin mode (the go-plugin host shows
//! each at its level), plain text on stderr on a terminal. Nothing is ever logged to stdout.

use std::fmt;
use std::io::IsTerminal;

use chrono::{SecondsFormat, Utc};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The levels plugin mode accepts, most severe first.
pub(crate) const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// A plugin log level that is not one of [`LOG_LEVELS`] nor a list of `target=level`
/// directives with such levels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid log level {value:?} (from {given_by}): expected one of error, warn, info, debug, \
     trace, or comma-separated directives such as \"info,rollgate=debug\""
)]
pub(crate) struct LogLevelError {
    /// The value given.
    pub value: String,
    /// Where it came from (`--log-level` or `ROLLGATE_LOG`).
    pub given_by: String,
}

/// Checks a plugin log level: a level of [`LOG_LEVELS`] or comma-separated `level` /
/// `target=level` directives. Anything else is refused rather than silently read as a target
/// name (EnvFilter takes `verbose` for "everything under the target verbose").
pub(crate) fn plugin_log_filter(value: &str, source: &str) -> Result<EnvFilter, LogLevelError> {
    let err = || LogLevelError {
        value: value.to_string(),
        given_by: source.to_string(),
    };
    let valid = !value.trim().is_empty()
        && value.split(',').all(|directive| {
            let level = match directive.trim().rsplit_once('=') {
                Some((target, level)) if !target.trim().is_empty() => level,
                Some(_) => "",
                None => directive,
            };
            LOG_LEVELS.contains(&level.trim().to_ascii_lowercase().as_str())
        });
    if !valid {
        return Err(err());
    }
    EnvFilter::try_new(value.to_ascii_lowercase())
        .map(quiet_signer)
        .map_err(|_| err())
}

/// `filter` with the `aws-sigv4` crate's events turned off whatever the level: at trace it
/// logs each canonical request, which holds the `X-Amz-Security-Token` header (an AWS session
/// token) in clear.
fn quiet_signer(filter: EnvFilter) -> EnvFilter {
    match "aws_sigv4=off".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// Installs JSON logging for plugin mode: one hclog line per event on stderr, with `@level`,
/// `@message`, `@timestamp` (`2006-01-02T15:04:05.000000Z07:00`), `@module` and the event's
/// fields. Does nothing if a subscriber is already installed.
pub(crate) fn init_hclog_logging(filter: EnvFilter) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(HclogJson)
        .try_init();
}

/// Keeps `serve`'s log writer thread running; dropping it writes out what is still queued.
pub(crate) type LogGuard = tracing_appender::non_blocking::WorkerGuard;

/// Installs `serve`'s logging on stderr, hclog JSON lines or text, through tracing-appender's
/// non-blocking writer: a request's worker only queues its line, and a thread of its own
/// writes it to stderr, so a slow reader of stderr does not stall the answer's worker. Not
/// lossy: when 128,000 lines are waiting (a stderr nobody reads), requests wait instead of
/// lines being dropped. Hold the guard until the server has stopped.
pub(crate) fn init_serve_logging(level: &str, json: bool) -> LogGuard {
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("rollgate-log")
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(writer);
    let _ = if json {
        builder.event_format(HclogJson).try_init()
    } else {
        builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .try_init()
    };
    guard
}

/// The hclog JSON line (without the newline) that reports a start-up failure at `error`:
/// go-plugin hosts log a JSON line at its `@level`, and plain text only at debug (unless it
/// starts with `[ERROR]`), so this is how a failure reaches the controller's log.
pub(crate) fn startup_error_line(message: &str) -> String {
    HclogLine {
        level: "error",
        message,
        timestamp: &Utc::now(),
        module: "rollgate",
        fields: &[],
    }
    .to_json()
}

/// Writes [`startup_error_line`] to stderr.
pub(crate) fn report_startup_error(message: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{}", startup_error_line(message)).and_then(|()| err.flush());
}

/// Installs human-readable logging on stderr for the command line.
pub(crate) fn init_cli_logging(level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

fn filter(level: &str) -> EnvFilter {
    quiet_signer(EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info")))
}

/// hclog's level names.
fn hclog_level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

/// Formats events as hclog JSON lines.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct HclogJson;

impl<S, N> FormatEvent<S, N> for HclogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writer.write_str(&hclog_line(event, &Utc::now()))?;
        writer.write_char('\n')
    }
}

/// One event as an hclog JSON object (without the newline): the `@` keys, then the event's
/// fields in their order (any starting with `@` dropped).
fn hclog_line(event: &Event<'_>, now: &chrono::DateTime<Utc>) -> String {
    let meta = event.metadata();
    let mut fields = JsonFields::default();
    event.record(&mut fields);
    HclogLine {
        level: hclog_level(meta.level()),
        message: &fields.message,
        timestamp: now,
        module: meta.target(),
        fields: &fields.fields,
    }
    .to_json()
}

/// An hclog JSON object. Its keys are written in this order (`@level`, `@message`,
/// `@timestamp`, `@module`, then the event's fields as logged), not sorted: a person reading
/// the log finds the level and message first.
struct HclogLine<'a> {
    level: &'a str,
    /// go-plugin's host type-asserts `@message` to a string: always one, maybe empty.
    message: &'a str,
    timestamp: &'a chrono::DateTime<Utc>,
    module: &'a str,
    fields: &'a [(&'static str, serde_json::Value)],
}

impl HclogLine<'_> {
    fn to_json(&self) -> String {
        // Strings, numbers and `Value`s always serialize.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl serde::Serialize for HclogLine<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4 + self.fields.len()))?;
        map.serialize_entry("@level", self.level)?;
        map.serialize_entry("@message", self.message)?;
        // 2006-01-02T15:04:05.000000Z07:00, hclog's layout.
        map.serialize_entry(
            "@timestamp",
            &self.timestamp.to_rfc3339_opts(SecondsFormat::Micros, true),
        )?;
        map.serialize_entry("@module", self.module)?;
        for (name, value) in self.fields {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// An event's message and its other fields, as JSON values.
#[derive(Default)]
struct JsonFields {
    message: String,
    fields: Vec<(&'static str, serde_json::Value)>,
}

impl JsonFields {
    /// Keeps a field, unless its name starts with `@` (hclog's own keys).
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        let name = field.name();
        if !name.starts_with('@') {
            self.fields.push((name, value));
        }
    }
}

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.put(field, text.into());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.put(field, value.into());
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and the infinities are not JSON numbers: serde_json makes them null.
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn events_become_hclog_json_lines() {
        let buf = Buf::default();
        let b2 = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_env_filter(filter("debug"))
            .with_writer(move || b2.clone())
            .event_format(HclogJson)
            .finish();
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(
                metric = "error-rate",
                count = 3,
                detail = %"tab\there \"q\"\u{1}",
                "query \"failed\"\nretrying"
            );
            tracing::trace!("filtered out");
            tracing::info!(ratio = f64::NAN, ok = true, "with odd values");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        let odd: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(odd["ratio"], Value::Null, "NaN is not JSON");
        assert_eq!(odd["ok"], true);
        assert_eq!(odd["@message"], "with odd values");
        // hclog's keys first, then the fields in the order they were logged.
        assert!(
            lines[0].starts_with(
                r#"{"@level":"warn","@message":"query \"failed\"\nretrying","@timestamp":"#
            ),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains(
                r#""@module":"rollgate::logging::tests","metric":"error-rate","count":3,"detail":"#
            ),
            "{}",
            lines[0]
        );
        let v: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["@level"], "warn");
        assert_eq!(v["@message"], "query \"failed\"\nretrying");
        assert_eq!(v["metric"], "error-rate");
        assert_eq!(v["count"], 3);
        assert_eq!(v["detail"], "tab\there \"q\"\u{1}");
        let ts = v["@timestamp"].as_str().unwrap();
        // 2006-01-02T15:04:05.000000Z07:00 with UTC: exactly six fraction digits, then Z.
        assert_eq!(ts.len(), "2006-01-02T15:04:05.000000Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok());
    }

    #[test]
    fn cli_bad_level_falls_back_to_info() {
        // aws-sigv4's own events stay off at every level (they print the session token).
        assert_eq!(filter("not a [level").to_string(), "aws_sigv4=off,info");
        assert_eq!(filter("debug").to_string(), "aws_sigv4=off,debug");
        assert_eq!(filter("trace").to_string(), "aws_sigv4=off,trace");
    }

    #[test]
    fn plugin_levels_are_checked_not_guessed() {
        for ok in [
            "info",
            "DEBUG",
            "warn,rollgate=trace",
            "rollgate::goplugin=debug",
        ] {
            assert!(plugin_log_filter(ok, "--log-level").is_ok(), "{ok}");
        }
        for bad in [
            "",
            "verbose",
            "infoo",
            "=debug",
            "rollgate=loud",
            "info,",
            "not a [level",
        ] {
            let e = plugin_log_filter(bad, "ROLLGATE_LOG").unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            assert!(msg.contains("ROLLGATE_LOG"), "{msg}");
            assert!(msg.contains("error, warn, info, debug, trace"), "{msg}");
        }
    }

    #[test]
    fn startup_errors_are_one_hclog_error_line() {
        let line = startup_error_line("bad \"thing\"\nsecond line");
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["@level"], "error");
        assert_eq!(v["@message"], "bad \"thing\"\nsecond line");
        let ts = v["@timestamp"].as_str().unwrap();
        assert_eq!(ts.len(), "2006-01-02T15:04:05.000000Z".len(), "{ts}");
    }
}
