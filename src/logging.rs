//! Logging setup: hclog-style JSON lines on stderr in plugin mode (the go-plugin host shows
//! each at its level), plain text on stderr on a terminal. Nothing is ever logged to stdout.

use std::fmt;
use std::io::IsTerminal;

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value};
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
    EnvFilter::try_new(value.to_ascii_lowercase()).map_err(|_| err())
}

/// Installs hclog JSON logging (see [`init_hclog_logging`]) with `level`, a level or
/// EnvFilter directives; an invalid one falls back to `info` (`serve --log-format json`; plugin
/// mode checks its level with [`plugin_log_filter`] first).
pub(crate) fn init_plugin_logging(level: &str) {
    init_hclog_logging(filter(level));
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

/// The hclog JSON line (without the newline) that reports a start-up failure at `error`:
/// go-plugin hosts log a JSON line at its `@level`, and plain text only at debug (unless it
/// starts with `[ERROR]`), so this is how a failure reaches the controller's log.
pub(crate) fn startup_error_line(message: &str) -> String {
    hclog_object("error", message, "rollgate", &Utc::now(), Map::new()).to_string()
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
    EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"))
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
        writeln!(writer, "{}", hclog_line(event, &Utc::now()))
    }
}

/// One event as an hclog JSON object (without the newline).
fn hclog_line(event: &Event<'_>, now: &chrono::DateTime<Utc>) -> String {
    let meta = event.metadata();
    let mut fields = JsonFields::default();
    event.record(&mut fields);
    hclog_object(
        hclog_level(meta.level()),
        &fields.message.unwrap_or_default(),
        meta.target(),
        now,
        fields.fields,
    )
    .to_string()
}

/// An hclog JSON object: the `@` keys, then `fields` (any of theirs starting with `@` dropped).
fn hclog_object(
    level: &str,
    message: &str,
    module: &str,
    now: &chrono::DateTime<Utc>,
    fields: Map<String, Value>,
) -> Value {
    let mut obj = Map::new();
    obj.insert("@level".into(), Value::from(level));
    // go-plugin's host type-asserts @message to a string: always send one.
    obj.insert("@message".into(), Value::from(message));
    obj.insert(
        "@timestamp".into(),
        Value::from(now.to_rfc3339_opts(SecondsFormat::Micros, true)),
    );
    obj.insert("@module".into(), Value::from(module));
    for (k, v) in fields {
        if !k.starts_with('@') {
            obj.insert(k, v);
        }
    }
    Value::Object(obj)
}

#[derive(Default)]
struct JsonFields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl JsonFields {
    fn put(&mut self, field: &Field, v: Value) {
        if field.name() == "message" {
            self.message = Some(match v {
                Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.fields.insert(field.name().to_string(), v);
        }
    }
}

impl Visit for JsonFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(
            field,
            serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number),
        );
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::from(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
                "query \"failed\"\nretrying"
            );
            tracing::trace!("filtered out");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let v: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["@level"], "warn");
        assert_eq!(v["@message"], "query \"failed\"\nretrying");
        assert_eq!(v["metric"], "error-rate");
        assert_eq!(v["count"], 3);
        let ts = v["@timestamp"].as_str().unwrap();
        // 2006-01-02T15:04:05.000000Z07:00 with UTC: exactly six fraction digits, then Z.
        assert_eq!(ts.len(), "2006-01-02T15:04:05.000000Z".len(), "{ts}");
        assert!(ts.ends_with('Z'));
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok());
    }

    #[test]
    fn cli_bad_level_falls_back_to_info() {
        assert_eq!(filter("not a [level").to_string(), "info");
        assert_eq!(filter("debug").to_string(), "debug");
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
