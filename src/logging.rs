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

/// Installs JSON logging for plugin mode: one hclog line per event on stderr, with `@level`,
/// `@message`, `@timestamp` (`2006-01-02T15:04:05.000000Z07:00`), `@module` and the event's
/// fields. `level` is a level (`info`, `debug`) or EnvFilter directives; an invalid one falls
/// back to `info`. Does nothing if a subscriber is already installed.
pub fn init_plugin_logging(level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(level))
        .with_writer(std::io::stderr)
        .event_format(HclogJson)
        .try_init();
}

/// Installs human-readable logging on stderr for the command line.
pub fn init_cli_logging(level: &str) {
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
pub struct HclogJson;

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
    let mut obj = Map::new();
    obj.insert("@level".into(), Value::from(hclog_level(meta.level())));
    // go-plugin's host type-asserts @message to a string: always send one.
    obj.insert(
        "@message".into(),
        Value::from(fields.message.unwrap_or_default()),
    );
    obj.insert(
        "@timestamp".into(),
        Value::from(now.to_rfc3339_opts(SecondsFormat::Micros, true)),
    );
    obj.insert("@module".into(), Value::from(meta.target()));
    for (k, v) in fields.fields {
        if !k.starts_with('@') {
            obj.insert(k, v);
        }
    }
    Value::Object(obj).to_string()
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
    fn bad_level_falls_back_to_info() {
        assert_eq!(filter("not a [level").to_string(), "info");
        assert_eq!(filter("debug").to_string(), "debug");
    }
}
