//! The values a condition works on: `result` and everything computed from it.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// A value in the condition language (what Go's expr sees as `any`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `nil`.
    #[default]
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// Go's `int`.
    Int(i64),
    /// Go's `float64`.
    Float(f64),
    /// A string.
    String(String),
    /// `[]any`.
    Array(Vec<Value>),
    /// `map[string]any`, in key order.
    Map(BTreeMap<String, Value>),
}

/// Shared `nil` for lookups that find nothing (a missing map key).
pub(crate) static NIL: Value = Value::Nil;

impl Value {
    /// expr's name for the value's type, as its `type()` builtin spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }

    /// The value as a float when it is a number.
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::Float(f) => Some(f),
            _ => None,
        }
    }

    /// True when the value is "no data" for a message: nil or an empty array.
    pub fn is_nil_or_empty(&self) -> bool {
        match self {
            Value::Nil => true,
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
}

impl From<&serde_json::Value> for Value {
    /// JSON integers become `Int` when they fit an i64, other numbers `Float`.
    fn from(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Value::String(s.clone()),
            serde_json::Value::Array(a) => Value::Array(a.iter().map(Value::from).collect()),
            serde_json::Value::Object(o) => {
                Value::Map(o.iter().map(|(k, v)| (k.clone(), Value::from(v))).collect())
            }
        }
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Self {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

impl From<BTreeMap<String, Value>> for Value {
    fn from(m: BTreeMap<String, Value>) -> Self {
        Value::Map(m)
    }
}

/// Formats like Go's `fmt.Sprintf("%v", v)`, which is what expr's `string()` returns.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("<nil>"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => f.write_str(&go_float(*x)),
            Value::String(s) => f.write_str(s),
            Value::Array(items) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Value::Map(map) => {
                f.write_str("map[")?;
                for (i, (k, v)) in map.iter().enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    write!(f, "{k}:{v}")?;
                }
                f.write_char(']')
            }
        }
    }
}

/// A length or index as an expr `int`. Lengths are at most `isize::MAX`, so they always fit;
/// the saturation only keeps the conversion total.
pub(crate) fn int_of_len(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Roughly how much memory a copy of `v` takes, in budget units (one element, one map entry,
/// or 16 bytes of string each).
pub(crate) fn weight(v: &Value) -> usize {
    match v {
        Value::String(s) => 1 + s.len() / 16,
        Value::Array(items) => items.iter().fold(1, |n, i| n.saturating_add(weight(i))),
        Value::Map(m) => m.iter().fold(1, |n, (k, v)| {
            n.saturating_add(1 + k.len() / 16).saturating_add(weight(v))
        }),
        _ => 1,
    }
}

/// The value as Go prints it, cut short for error messages.
pub(crate) fn preview(v: &Value) -> String {
    const MAX: usize = 100;
    let mut text = v.to_string();
    if text.len() > MAX {
        let mut cut = MAX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// Go's `%v` for a float64: shortest round-trip digits, in exponent form when the decimal
/// exponent is below -4 or at least 6 (`1e+06`), with at least two exponent digits.
pub(crate) fn go_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "-1.5e-7".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", exp.unsigned_abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = exp.unsigned_abs() as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            let (int_part, frac) = digits.split_at(int_len);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac);
        }
    }
    out
}

/// expr v1.15.5's `==` (`runtime.Equal`): numbers compare by value across int and float (NaN
/// equals nothing), strings and booleans by value, and everything else with Go's
/// `reflect.DeepEqual`, which is strict about element types (`[1] == [1.0]` is false).
pub(crate) fn go_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => *x as f64 == *y,
        _ => deep_equal(a, b),
    }
}

/// Go's `reflect.DeepEqual` on two values of the same Go element type `interface {}`:
/// the same kind and deeply equal contents; floats with `==`, so NaN is unequal to itself.
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_equal(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((kx, vx), (ky, vy))| kx == ky && deep_equal(vx, vy))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_integers_become_int_and_others_float() {
        let json: serde_json::Value = serde_json::from_str(
            r#"{"a": 1, "b": 1.5, "c": 18446744073709551615, "d": [true, null, "x"]}"#,
        )
        .unwrap();
        let v = Value::from(&json);
        let Value::Map(m) = v else {
            panic!("not a map")
        };
        assert_eq!(m["a"], Value::Int(1));
        assert_eq!(m["b"], Value::Float(1.5));
        assert_eq!(m["c"], Value::Float(18446744073709551615.0));
        assert_eq!(
            m["d"],
            Value::Array(vec![Value::Bool(true), Value::Nil, Value::from("x")])
        );
    }

    #[test]
    fn floats_format_like_go() {
        let cases = [
            (1.5, "1.5"),
            (10.0, "10"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (123456789.0, "1.23456789e+08"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (0.1 + 0.2, "0.30000000000000004"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (-0.0, "-0"),
            (0.0, "0"),
        ];
        for (x, want) in cases {
            assert_eq!(go_float(x), want, "formatting {x:e}");
        }
    }

    #[test]
    fn display_matches_go_percent_v() {
        let mut m = BTreeMap::new();
        m.insert("b".to_string(), Value::Int(2));
        m.insert("a".to_string(), Value::from(vec![1.5, 2.0]));
        assert_eq!(Value::Map(m).to_string(), "map[a:[1.5 2] b:2]");
        assert_eq!(Value::Nil.to_string(), "<nil>");
        assert_eq!(Value::from("x y").to_string(), "x y");
    }

    #[test]
    fn equality_crosses_numeric_types_only_at_the_top() {
        assert!(go_equal(&Value::Int(10), &Value::Float(10.0)));
        assert!(!go_equal(&Value::Float(f64::NAN), &Value::Float(f64::NAN)));
        assert!(!go_equal(&Value::from("1"), &Value::Int(1)));
        // reflect.DeepEqual: interface elements of different types differ.
        assert!(!go_equal(
            &Value::from(vec![1i64, 2]),
            &Value::from(vec![1.0, 2.0])
        ));
        assert!(go_equal(
            &Value::from(vec![1i64, 2]),
            &Value::from(vec![1i64, 2])
        ));
        assert!(!go_equal(
            &Value::from(vec![1i64]),
            &Value::from(vec![1i64, 2])
        ));
        assert!(go_equal(&Value::Nil, &Value::Nil));
        assert!(!go_equal(&Value::Nil, &Value::Bool(false)));
    }

    #[test]
    fn weight_grows_with_size_and_preview_is_short() {
        let small = Value::from(vec![1i64]);
        let big = Value::from(vec![Value::from("x".repeat(1600)); 10]);
        assert_eq!(weight(&small), 2);
        assert!(weight(&big) > 1000);
        let p = preview(&Value::from("é".repeat(500)));
        assert!(p.len() <= 103 && p.ends_with("..."));
        assert_eq!(preview(&Value::Int(5)), "5");
    }

    #[test]
    fn nil_or_empty_is_only_nil_and_empty_arrays() {
        assert!(Value::Nil.is_nil_or_empty());
        assert!(Value::Array(vec![]).is_nil_or_empty());
        assert!(!Value::from(vec![0.0]).is_nil_or_empty());
        assert!(!Value::Map(BTreeMap::new()).is_nil_or_empty());
        assert!(!Value::Float(f64::NAN).is_nil_or_empty());
    }
}
