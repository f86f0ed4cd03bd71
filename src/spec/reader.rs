//! A path-aware reader over a JSON object, so every validation error names its key.
//!
//! The spec is read from `serde_json::Value` (YAML is converted first) instead of derived
//! `Deserialize` impls because serde's errors cannot say `compare.maxIncrease: expected a number
//! >= 0, got "20%"`, and unknown keys must be reported with the closest known one.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Map, Value};

use super::duration::parse_duration;
use super::error::SpecError;

/// Reads the keys of one object and remembers which were read, to report the rest as unknown.
pub(crate) struct ObjectReader<'a> {
    path: String,
    map: &'a Map<String, Value>,
    known: BTreeSet<&'static str>,
}

impl<'a> ObjectReader<'a> {
    /// Starts reading `value` at `path`; fails unless it is an object.
    pub(crate) fn new(path: &str, value: &'a Value) -> Result<Self, SpecError> {
        match value {
            Value::Object(map) => Ok(ObjectReader {
                path: path.to_string(),
                map,
                known: BTreeSet::new(),
            }),
            other => Err(invalid(path, "an object", other)),
        }
    }

    /// The path of a key below this object.
    pub(crate) fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{}", self.path, key)
        }
    }

    /// The path of this object.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Whether the key is present (and not null); marks it as known.
    pub(crate) fn has(&mut self, key: &'static str) -> bool {
        self.get(key).is_some()
    }

    /// The raw value of a key, `None` when absent or null; marks it as known.
    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.known.insert(key);
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// An optional string. Numbers and booleans are not silently turned into strings.
    pub(crate) fn string(&mut self, key: &'static str) -> Result<Option<String>, SpecError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(&self.path_of(key), "a string", other)),
        }
    }

    /// A required non-empty string.
    pub(crate) fn required_string(
        &mut self,
        key: &'static str,
        hint: &str,
    ) -> Result<String, SpecError> {
        match self.string(key)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(SpecError::Invalid {
                path: self.path_of(key),
                expected: "a non-empty string".into(),
                got: "\"\"".into(),
            }),
            None => Err(SpecError::Missing {
                path: self.path_of(key),
                hint: hint.into(),
            }),
        }
    }

    /// An optional boolean.
    pub(crate) fn bool(&mut self, key: &'static str) -> Result<Option<bool>, SpecError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(invalid(&self.path_of(key), "true or false", other)),
        }
    }

    /// An optional finite number within `[min, max]`.
    pub(crate) fn number(
        &mut self,
        key: &'static str,
        min: f64,
        max: f64,
    ) -> Result<Option<f64>, SpecError> {
        let expected = || match (min, max) {
            (lo, hi) if hi == f64::MAX => format!("a number >= {lo}"),
            (lo, hi) => format!("a number from {lo} to {hi}"),
        };
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(v) if v.is_finite() && v >= min && v <= max => Ok(Some(v)),
                _ => Err(invalid(
                    &self.path_of(key),
                    &expected(),
                    &Value::Number(n.clone()),
                )),
            },
            Some(other) => Err(invalid(&self.path_of(key), &expected(), other)),
        }
    }

    /// An optional whole number within `[min, max]`.
    pub(crate) fn integer(
        &mut self,
        key: &'static str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, SpecError> {
        let expected = format!("a whole number from {min} to {max}");
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= min && v <= max => Ok(Some(v)),
                _ => Err(invalid(
                    &self.path_of(key),
                    &expected,
                    &Value::Number(n.clone()),
                )),
            },
            Some(other) => Err(invalid(&self.path_of(key), &expected, other)),
        }
    }

    /// An optional duration written as a string (`30s`, `5m`).
    pub(crate) fn duration(&mut self, key: &'static str) -> Result<Option<Duration>, SpecError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                parse_duration(s)
                    .map(Some)
                    .map_err(|why| SpecError::Invalid {
                        path: self.path_of(key),
                        expected: "a duration like 30s, 5m or 1h".into(),
                        got: why.to_string(),
                    })
            }
            Some(other) => Err(invalid(
                &self.path_of(key),
                "a duration string like \"30s\"",
                other,
            )),
        }
    }

    /// An optional nested object.
    pub(crate) fn object(
        &mut self,
        key: &'static str,
    ) -> Result<Option<ObjectReader<'a>>, SpecError> {
        let path = self.path_of(key);
        match self.get(key) {
            None => Ok(None),
            Some(v) => ObjectReader::new(&path, v).map(Some),
        }
    }

    /// An optional map of string to string (e.g. HTTP headers).
    pub(crate) fn string_map(
        &mut self,
        key: &'static str,
    ) -> Result<Vec<(String, String)>, SpecError> {
        let Some(mut obj) = self.object(key)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for (k, v) in obj.map {
            match v {
                Value::String(s) => out.push((k.clone(), s.clone())),
                other => return Err(invalid(&obj.path_of(k), "a string", other)),
            }
        }
        obj.known.clear();
        Ok(out)
    }

    /// Fails on the first key that was never asked for, suggesting the closest known key.
    pub(crate) fn finish(self) -> Result<(), SpecError> {
        for key in self.map.keys() {
            if !self.known.contains(key.as_str()) {
                let suggestion = closest(key, &self.known).map(str::to_string);
                return Err(SpecError::Unknown {
                    path: self.path_of(key),
                    suggestion,
                });
            }
        }
        Ok(())
    }
}

/// An `Invalid` error that shows the offending value compactly.
pub(crate) fn invalid(path: &str, expected: &str, got: &Value) -> SpecError {
    SpecError::Invalid {
        path: path.to_string(),
        expected: expected.to_string(),
        got: describe(got),
    }
}

/// A short rendering of a JSON value for error messages.
pub(crate) fn describe(v: &Value) -> String {
    let text = match v {
        Value::Null => "null".to_string(),
        Value::Object(_) => "an object".to_string(),
        Value::Array(_) => "a list".to_string(),
        other => other.to_string(),
    };
    if text.len() > 80 {
        let cut = (0..=77)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}...", &text[..cut])
    } else {
        text
    }
}

/// The object that holds the key at `rest` (a path relative to `node`, as errors write them:
/// `provider.plugin.rollgate/analysis.minRequests.count`, `headers[0].key`) and that key's
/// name; the key itself need not exist. Keys may hold dots: the longest key that fits wins.
pub(crate) fn parent_mut<'v>(
    node: &'v mut Value,
    rest: &str,
) -> Option<(&'v mut Map<String, Value>, String)> {
    match node {
        Value::Object(map) => {
            if !rest.contains(['.', '[']) || map.contains_key(rest) {
                return Some((map, rest.to_string()));
            }
            let key = map
                .keys()
                .filter(|k| {
                    rest.starts_with(k.as_str())
                        && matches!(rest.as_bytes().get(k.len()), Some(b'.' | b'['))
                })
                .max_by_key(|k| k.len())?
                .clone();
            let after = &rest[key.len()..];
            let after = after.strip_prefix('.').unwrap_or(after);
            parent_mut(map.get_mut(&key)?, after)
        }
        Value::Array(items) => {
            let inner = rest.strip_prefix('[')?;
            let close = inner.find(']')?;
            let i: usize = inner[..close].parse().ok()?;
            let after = &inner[close + 1..];
            let after = after.strip_prefix('.').unwrap_or(after);
            parent_mut(items.get_mut(i)?, after)
        }
        _ => None,
    }
}

/// `path` relative to `base` (`spec.metrics[0].query` below `spec.metrics[0]` is `query`).
pub(crate) fn relative<'p>(path: &'p str, base: &str) -> &'p str {
    if base.is_empty() {
        return path;
    }
    match path.strip_prefix(base) {
        Some(rest) => rest.strip_prefix('.').unwrap_or(rest),
        None => path,
    }
}

/// A required key reported missing beside an unknown key that is a typo of it (`cuont:` for
/// `count:`) is reported as that unknown key with the suggestion: the typo is the mistake, and
/// "count is required" would point away from it. Other errors are returned as they are.
pub(crate) fn prefer_typo(err: SpecError, value: &Value, base: &str) -> SpecError {
    let SpecError::Missing { path, .. } = &err else {
        return err;
    };
    let mut copy = value.clone();
    let Some((map, missing)) = parent_mut(&mut copy, relative(path, base)) else {
        return err;
    };
    let lower = missing.to_ascii_lowercase();
    let typo = map
        .keys()
        .filter(|k| *k != &missing)
        .map(|k| (edit_distance(&k.to_ascii_lowercase(), &lower), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k.clone());
    match typo {
        Some(k) => {
            let parent = path.strip_suffix(missing.as_str()).unwrap_or("");
            SpecError::Unknown {
                path: format!("{parent}{k}"),
                suggestion: Some(missing),
            }
        }
        None => err,
    }
}

pub(crate) fn closest<'k>(key: &str, known: &BTreeSet<&'k str>) -> Option<&'k str> {
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_unknown_key_with_suggestion() {
        let v = json!({"query": "up", "nodata": "fail"});
        let mut r = ObjectReader::new("spec", &v).unwrap();
        r.string("query").unwrap();
        r.string("noData").unwrap();
        let err = r.finish().unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.nodata: unknown key (did you mean \"noData\"?)"
        );
    }

    #[test]
    fn number_errors_name_path_and_value() {
        let v = json!({"maxIncrease": "20%"});
        let mut r = ObjectReader::new("compare", &v).unwrap();
        let err = r.number("maxIncrease", 0.0, f64::MAX).unwrap_err();
        assert_eq!(
            err.to_string(),
            "compare.maxIncrease: expected a number >= 0, got \"20%\""
        );
    }

    #[test]
    fn duration_errors_say_why() {
        let v = json!({"timeout": "10"});
        let mut r = ObjectReader::new("prometheus", &v).unwrap();
        let err = r.duration("timeout").unwrap_err().to_string();
        assert!(
            err.starts_with("prometheus.timeout: expected a duration"),
            "{err}"
        );
        assert!(err.contains("lacks a unit"), "{err}");
    }
}
