//! The functions a condition can call: expr's builtins and Argo's additions.

use std::borrow::Cow;
use std::cmp::Ordering;

use super::error::ConditionError;
use super::eval::{Budget, Flow};
use super::go_float::parse_go_float;
use super::value::{int_of_len, weight, Value};

/// Every callable function, resolved at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Function {
    // Predicate builtins (take a closure).
    All,
    Any,
    None,
    One,
    Filter,
    Map,
    Count,
    Sum,
    Find,
    FindIndex,
    FindLast,
    FindLastIndex,
    // Plain builtins.
    Len,
    Type,
    Abs,
    Ceil,
    Floor,
    Round,
    Int,
    Float,
    String,
    Max,
    Min,
    Mean,
    Median,
    First,
    Last,
    Get,
    Take,
    Keys,
    Values,
    Reverse,
    Concat,
    Sort,
    Join,
    Split,
    Upper,
    Lower,
    Trim,
    TrimPrefix,
    TrimSuffix,
    Replace,
    Repeat,
    IndexOf,
    LastIndexOf,
    HasPrefix,
    HasSuffix,
    // Argo's environment functions.
    AsInt,
    AsFloat,
    IsNaN,
    IsInf,
    IsNil,
    Default,
}

/// What a predicate builtin takes in each position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    Expr,
    Predicate,
    OptionalPredicate,
}

const NAMES: &[(&str, Function)] = &[
    ("all", Function::All),
    ("any", Function::Any),
    ("none", Function::None),
    ("one", Function::One),
    ("filter", Function::Filter),
    ("map", Function::Map),
    ("count", Function::Count),
    ("sum", Function::Sum),
    ("find", Function::Find),
    ("findIndex", Function::FindIndex),
    ("findLast", Function::FindLast),
    ("findLastIndex", Function::FindLastIndex),
    ("len", Function::Len),
    ("type", Function::Type),
    ("abs", Function::Abs),
    ("ceil", Function::Ceil),
    ("floor", Function::Floor),
    ("round", Function::Round),
    ("int", Function::Int),
    ("float", Function::Float),
    ("string", Function::String),
    ("max", Function::Max),
    ("min", Function::Min),
    ("mean", Function::Mean),
    ("median", Function::Median),
    ("first", Function::First),
    ("last", Function::Last),
    ("get", Function::Get),
    ("take", Function::Take),
    ("keys", Function::Keys),
    ("values", Function::Values),
    ("reverse", Function::Reverse),
    ("concat", Function::Concat),
    ("sort", Function::Sort),
    ("join", Function::Join),
    ("split", Function::Split),
    ("upper", Function::Upper),
    ("lower", Function::Lower),
    ("trim", Function::Trim),
    ("trimPrefix", Function::TrimPrefix),
    ("trimSuffix", Function::TrimSuffix),
    ("replace", Function::Replace),
    ("repeat", Function::Repeat),
    ("indexOf", Function::IndexOf),
    ("lastIndexOf", Function::LastIndexOf),
    ("hasPrefix", Function::HasPrefix),
    ("hasSuffix", Function::HasSuffix),
    ("asInt", Function::AsInt),
    ("asFloat", Function::AsFloat),
    ("isNaN", Function::IsNaN),
    ("isInf", Function::IsInf),
    ("isNil", Function::IsNil),
    ("default", Function::Default),
];

/// expr builtins that rollgate deliberately leaves out (named so the error can say so).
const UNSUPPORTED: &[&str] = &[
    "groupBy",
    "sortBy",
    "reduce",
    "toJSON",
    "fromJSON",
    "toBase64",
    "fromBase64",
    "now",
    "duration",
    "date",
    "timezone",
    "toPairs",
    "fromPairs",
    "uniq",
    "flatten",
    "splitAfter",
    "bitand",
    "bitor",
    "bitxor",
    "bitnand",
    "bitnot",
    "bitshl",
    "bitshr",
    "bitushr",
];

impl Function {
    /// The function called `name`, if any.
    pub(crate) fn lookup(name: &str) -> Option<Function> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// Why `name` is not callable, when it is an expr builtin rollgate does not support.
    pub(crate) fn unsupported_hint(name: &str) -> Option<&'static str> {
        UNSUPPORTED
            .contains(&name)
            .then_some("an expr builtin that rollgate does not support")
    }

    /// The name as written in conditions.
    pub(crate) fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    /// The argument layout of predicate builtins; `None` for plain functions.
    pub(crate) fn predicate_args(self) -> Option<&'static [Arg]> {
        use Arg::*;
        Some(match self {
            Function::All
            | Function::Any
            | Function::None
            | Function::One
            | Function::Filter
            | Function::Map
            | Function::Find
            | Function::FindIndex
            | Function::FindLast
            | Function::FindLastIndex => &[Expr, Predicate],
            Function::Count | Function::Sum => &[Expr, OptionalPredicate],
            _ => return None,
        })
    }

    /// Minimum and maximum argument counts of plain functions (and how to say it).
    pub(crate) fn arity(self) -> (usize, usize, &'static str) {
        use Function::*;
        match self {
            Max | Min | Mean | Median => (1, usize::MAX, "at least 1"),
            Concat => (1, usize::MAX, "at least 1"),
            Trim | TrimPrefix | TrimSuffix | Join | Sort => (1, 2, "1 or 2"),
            Split => (2, 3, "2 or 3"),
            Replace => (3, 4, "3 or 4"),
            Repeat => (2, 2, "2"),
            Get | Take | IndexOf | LastIndexOf | HasPrefix | HasSuffix | Default => (2, 2, "2"),
            Count | Sum => (1, 2, "1 or 2"),
            All | Any | None | One | Filter | Map | Find | FindIndex | FindLast | FindLastIndex => {
                (2, 2, "2")
            }
            _ => (1, 1, "1"),
        }
    }
}

fn invalid(function: Function, message: impl Into<String>) -> Flow {
    Flow::from(ConditionError::Function {
        function: function.name(),
        message: message.into(),
    })
}

fn bad_type(function: Function, v: &Value) -> Flow {
    invalid(function, format!("invalid argument type {}", v.type_name()))
}

fn owned<'a>(v: Value) -> Result<Cow<'a, Value>, Flow> {
    Ok(Cow::Owned(v))
}

fn string_arg(function: Function, v: &Value) -> Result<&str, Flow> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(invalid(
            function,
            format!("expected a string, got {}", other.type_name()),
        )),
    }
}

fn array_arg(function: Function, v: &Value) -> Result<&[Value], Flow> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(invalid(
            function,
            format!("expected an array, got {}", other.type_name()),
        )),
    }
}

fn int_arg(function: Function, v: &Value) -> Result<i64, Flow> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(invalid(
            function,
            format!("expected an integer, got {}", other.type_name()),
        )),
    }
}

/// Float to int as Go's conversion does (truncation), refusing what Go leaves undefined.
pub(crate) fn float_to_int(function: &'static str, f: f64) -> Result<i64, ConditionError> {
    // 2^63 is exactly representable; anything at or past it does not fit.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if (-LIMIT..LIMIT).contains(&f) {
        // In range (checked just above), so the cast is exact after truncation.
        #[allow(clippy::cast_possible_truncation)]
        let i = f.trunc() as i64;
        Ok(i)
    } else {
        Err(ConditionError::Function {
            function,
            message: format!("cannot convert {} to an integer", super::value::go_float(f)),
        })
    }
}

/// Numeric ordering as expr's `<` (int and float mixed), `None` for non-numbers or NaN.
fn num_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// The arguments of max/min, which expr 1.15.5 takes as numbers only (not arrays).
fn numbers<'v>(function: Function, args: &'v [Cow<'_, Value>]) -> Result<Vec<&'v Value>, Flow> {
    args.iter()
        .map(|a| match &**a {
            v @ (Value::Int(_) | Value::Float(_)) => Ok(v),
            other => Err(bad_type(function, other)),
        })
        .collect()
}

/// The elements of the one array mean/median take, as floats (expr 1.15.5: ints and floats).
fn elements(function: Function, args: &[Cow<'_, Value>]) -> Result<Vec<f64>, Flow> {
    let verb = if function == Function::Mean {
        "mean"
    } else {
        "median"
    };
    let [list] = args else {
        return Err(invalid(
            function,
            format!(
                "invalid number of arguments (expected 1, got {})",
                args.len()
            ),
        ));
    };
    let Value::Array(items) = &**list else {
        return Err(invalid(
            function,
            format!("cannot {verb} {}", list.type_name()),
        ));
    };
    items
        .iter()
        .map(|v| {
            v.as_f64()
                .ok_or_else(|| invalid(function, format!("cannot {verb} {}", v.type_name())))
        })
        .collect()
}

/// Splits like Go's strings.SplitN (`n < 0`: all parts).
fn go_split(s: &str, sep: &str, n: i64) -> Vec<Value> {
    if n == 0 {
        return Vec::new();
    }
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut parts: Vec<Value> = Vec::new();
    if sep.is_empty() {
        let mut rest = s;
        while !rest.is_empty() {
            if parts.len() + 1 == limit {
                parts.push(Value::from(rest));
                return parts;
            }
            let len = rest.chars().next().map_or(1, char::len_utf8);
            let (head, tail) = rest.split_at(len);
            parts.push(Value::from(head));
            rest = tail;
        }
        return parts;
    }
    s.splitn(limit, sep).map(Value::from).collect()
}

/// A result as Argo's Prometheus provider makes it: a float64, a []float64, or nothing.
fn prometheus_shaped(result: &Value) -> bool {
    match result {
        Value::Nil | Value::Float(_) => true,
        Value::Array(items) => items.iter().all(|v| matches!(v, Value::Float(_))),
        _ => false,
    }
}

/// Go's strings.Replace: the first `n` non-overlapping `old` (all when `n < 0`); an empty
/// `old` matches before every character and at the end.
fn go_replace(s: &str, old: &str, new: &str, n: i64) -> String {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    if limit == 0 || (s.is_empty() && !old.is_empty()) {
        return s.to_owned();
    }
    if !old.is_empty() {
        return s.replacen(old, new, limit);
    }
    let mut out = String::with_capacity(s.len());
    let mut done = 0;
    for c in s.chars() {
        if done < limit {
            out.push_str(new);
            done += 1;
        }
        out.push(c);
    }
    if done < limit {
        out.push_str(new);
    }
    out
}

/// Go's strings.ToUpper: `unicode.ToUpper` on each character, Unicode's simple case mapping
/// (`ß` and `ﬀ` stay, `ᾳ` becomes `ᾼ`). Rust's `to_uppercase` is the full mapping; where that
/// gives several characters, the simple mapping is the titlecase-to-uppercase table below
/// or the character itself.
fn go_upper(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => simple_upper_of_multi(c),
            }
        })
        .collect()
}

/// The simple uppercase of the characters whose full uppercase is several characters
/// (UnicodeData.txt field 12 for SpecialCasing.txt's unconditional entries).
fn simple_upper_of_multi(c: char) -> char {
    let u = u32::from(c);
    let mapped = match u {
        // ᾀ-ᾇ, ᾐ-ᾗ, ᾠ-ᾧ: to ᾈ-ᾏ, ᾘ-ᾟ, ᾨ-ᾯ.
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => u + 8,
        0x1FB3 => 0x1FBC,
        0x1FC3 => 0x1FCC,
        0x1FF3 => 0x1FFC,
        _ => u,
    };
    char::from_u32(mapped).unwrap_or(c)
}

/// Go's strings.ToLower: `unicode.ToLower` on each character (simple mapping: `İ` becomes
/// `i`, and `Σ` is always `σ`, never the final `ς`).
fn go_lower(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut low = c.to_lowercase();
            match (low.next(), low.next()) {
                (Some(l), None) => l,
                // Only U+0130 has a longer full lowercase; its simple one is `i`.
                _ if c == '\u{130}' => 'i',
                _ => c,
            }
        })
        .collect()
}

/// Trims like Go's strings.Trim: every char of `cutset` from both ends.
fn go_trim<'s>(s: &'s str, cutset: &str) -> &'s str {
    s.trim_matches(|c| cutset.contains(c))
}

/// Calls a plain (non-predicate) function on evaluated arguments.
pub(crate) fn apply<'a>(
    f: Function,
    args: &[Cow<'a, Value>],
    result: &'a Value,
    budget: &Budget,
) -> Result<Cow<'a, Value>, Flow> {
    use Function as F;
    let arg = |i: usize| -> &Value { args.get(i).map_or(&super::value::NIL, |c| &**c) };
    let a0 = arg(0);
    match f {
        F::Len => match a0 {
            Value::Array(a) => owned(Value::Int(int_of_len(a.len()))),
            Value::Map(m) => owned(Value::Int(int_of_len(m.len()))),
            // Go's len counts bytes: len("héllo") is 6.
            Value::String(s) => owned(Value::Int(int_of_len(s.len()))),
            other => Err(Flow::from(ConditionError::InvalidOperation(format!(
                "invalid argument for len (type {})",
                other.type_name()
            )))),
        },
        F::Type => owned(Value::from(a0.type_name())),
        F::Abs => match a0 {
            Value::Int(i) => owned(Value::Int(i.wrapping_abs())),
            Value::Float(x) => owned(Value::Float(if *x < 0.0 { -x } else { *x })),
            other => Err(bad_type(f, other)),
        },
        F::Ceil | F::Floor | F::Round => {
            let x = match a0 {
                Value::Int(i) => *i as f64,
                Value::Float(x) => match f {
                    F::Ceil => x.ceil(),
                    F::Floor => x.floor(),
                    _ => x.round(),
                },
                other => return Err(bad_type(f, other)),
            };
            owned(Value::Float(x))
        }
        F::Int => match a0 {
            Value::Int(i) => owned(Value::Int(*i)),
            Value::Float(x) => owned(Value::Int(float_to_int("int", *x)?)),
            Value::String(s) => match s.parse::<i64>() {
                Ok(i) => owned(Value::Int(i)),
                Err(_) => Err(invalid(f, format!("cannot parse {s:?} as an integer"))),
            },
            other => Err(bad_type(f, other)),
        },
        F::Float | F::AsFloat => match a0 {
            Value::Int(i) => owned(Value::Float(*i as f64)),
            Value::Float(x) => owned(Value::Float(*x)),
            Value::String(s) => match parse_go_float(s) {
                Some(x) => owned(Value::Float(x)),
                None => Err(invalid(f, format!("cannot parse {s:?} as a float"))),
            },
            other => Err(bad_type(f, other)),
        },
        F::AsInt => match a0 {
            Value::Int(i) => owned(Value::Int(*i)),
            Value::Float(x) => owned(Value::Int(float_to_int("asInt", *x)?)),
            Value::String(s) => match s.parse::<i64>() {
                Ok(i) => owned(Value::Int(i)),
                Err(_) => Err(invalid(f, format!("cannot parse {s:?} as an integer"))),
            },
            other => Err(bad_type(f, other)),
        },
        F::String => {
            let s = a0.to_string();
            budget.charge_string(s.len())?;
            owned(Value::String(s))
        }
        F::Max | F::Min => {
            let want = if f == F::Max {
                Ordering::Greater
            } else {
                Ordering::Less
            };
            let mut best: Option<&Value> = None;
            for v in numbers(f, args)? {
                // Like expr: a value replaces the best so far only when strictly better,
                // so NaN never wins over an earlier number.
                if best.is_none_or(|b| num_cmp(v, b) == Some(want)) {
                    best = Some(v);
                }
            }
            owned(best.cloned().unwrap_or(Value::Nil))
        }
        F::Mean => {
            let nums = elements(f, args)?;
            if nums.is_empty() {
                return owned(Value::Float(0.0));
            }
            let total: f64 = nums.iter().sum();
            owned(Value::Float(total / nums.len() as f64))
        }
        F::Median => {
            let mut nums = elements(f, args)?;
            // Go's sort.Float64s puts NaN first.
            nums.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
            });
            let n = nums.len();
            let m = if n == 0 {
                0.0
            } else if n % 2 == 1 {
                nums[n / 2]
            } else {
                // n >= 2 here, so n / 2 - 1 cannot underflow.
                (nums[n / 2 - 1] + nums[n / 2]) / 2.0
            };
            owned(Value::Float(m))
        }
        F::First | F::Last => match &args.first() {
            Some(Cow::Borrowed(Value::Array(a))) => {
                let item = if f == F::First { a.first() } else { a.last() };
                Ok(Cow::Borrowed(item.unwrap_or(&super::value::NIL)))
            }
            _ => match a0 {
                Value::Array(a) => {
                    let item = if f == F::First { a.first() } else { a.last() };
                    owned(item.cloned().unwrap_or(Value::Nil))
                }
                Value::Nil => owned(Value::Nil),
                other => Err(bad_type(f, other)),
            },
        },
        F::Get => {
            let found = match (a0, arg(1)) {
                (Value::Array(a), Value::Int(i)) => {
                    let i = if *i < 0 {
                        i.checked_add(int_of_len(a.len()))
                    } else {
                        Some(*i)
                    };
                    i.and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| a.get(i))
                }
                (Value::Map(m), Value::String(k)) => m.get(k),
                _ => None,
            };
            if let Some(v) = found {
                budget.charge(weight(v))?;
            }
            owned(found.cloned().unwrap_or(Value::Nil))
        }
        F::Take => {
            let a = array_arg(f, a0)?;
            let n = int_arg(f, arg(1))?;
            let n = usize::try_from(n).map_err(|_| invalid(f, "cannot take a negative count"))?;
            let part = a.get(..n.min(a.len())).unwrap_or_default();
            budget.charge_copies(part)?;
            owned(Value::Array(part.to_vec()))
        }
        F::Keys | F::Values => match a0 {
            Value::Map(m) => {
                budget.charge(m.len())?;
                if f == F::Values {
                    budget.charge(m.values().fold(0, |n, v| n.saturating_add(weight(v))))?;
                }
                let items = if f == F::Keys {
                    m.keys().map(|k| Value::from(k.as_str())).collect()
                } else {
                    m.values().cloned().collect()
                };
                owned(Value::Array(items))
            }
            other => Err(bad_type(f, other)),
        },
        F::Reverse => {
            let a = array_arg(f, a0)?;
            budget.charge_copies(a)?;
            owned(Value::Array(a.iter().rev().cloned().collect()))
        }
        F::Concat => {
            let mut out = Vec::new();
            for v in args {
                let a = array_arg(f, v)?;
                budget.charge_copies(a)?;
                out.extend(a.iter().cloned());
            }
            owned(Value::Array(out))
        }
        F::Sort => {
            let a = array_arg(f, a0)?;
            let desc = match args.get(1).map(|c| &**c) {
                None => false,
                Some(Value::String(s)) if s == "asc" => false,
                Some(Value::String(s)) if s == "desc" => true,
                Some(other) => {
                    return Err(invalid(
                        f,
                        format!("order must be \"asc\" or \"desc\", got {other}"),
                    ))
                }
            };
            budget.charge_copies(a)?;
            let all_numbers = a.iter().all(|v| v.as_f64().is_some());
            let all_strings = a.iter().all(|v| matches!(v, Value::String(_)));
            if !all_numbers && !all_strings {
                return Err(invalid(
                    f,
                    "can only sort an array of numbers or of strings",
                ));
            }
            // expr's copyArray (`builtin/sort.go`) wants one element type: ints and floats
            // together are an error.
            if let Some(first) = a.first() {
                if a.iter().any(|v| v.type_name() != first.type_name()) {
                    return Err(invalid(f, "cannot sort array of different types"));
                }
            }
            let mut out = a.to_vec();
            out.sort_by(|x, y| match (x, y) {
                (Value::String(p), Value::String(q)) => p.cmp(q),
                _ => x
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    .total_cmp(&y.as_f64().unwrap_or(f64::NAN)),
            });
            if desc {
                out.reverse();
            }
            owned(Value::Array(out))
        }
        F::Join => {
            let a = array_arg(f, a0)?;
            let glue = match args.get(1) {
                Some(g) => string_arg(f, g)?,
                None => "",
            };
            let parts = a
                .iter()
                .map(|v| string_arg(f, v))
                .collect::<Result<Vec<&str>, Flow>>()?;
            let total = parts
                .iter()
                .fold(0usize, |n, p| n.saturating_add(p.len()))
                .saturating_add(glue.len().saturating_mul(parts.len().saturating_sub(1)));
            budget.charge_string(total)?;
            owned(Value::String(parts.join(glue)))
        }
        F::Split => {
            let s = string_arg(f, a0)?;
            let sep = string_arg(f, arg(1))?;
            let n = match args.get(2) {
                Some(n) => int_arg(f, n)?,
                None => -1,
            };
            let parts = go_split(s, sep, n);
            budget.charge(parts.len())?;
            owned(Value::Array(parts))
        }
        F::Upper | F::Lower => {
            let s = string_arg(f, a0)?;
            budget.charge_string(s.len())?;
            owned(Value::String(if f == F::Upper {
                go_upper(s)
            } else {
                go_lower(s)
            }))
        }
        F::Trim => {
            let s = string_arg(f, a0)?;
            let t = match args.get(1) {
                Some(c) => go_trim(s, string_arg(f, c)?),
                None => s.trim(),
            };
            owned(Value::from(t))
        }
        F::TrimPrefix | F::TrimSuffix => {
            let s = string_arg(f, a0)?;
            let affix = match args.get(1) {
                Some(p) => string_arg(f, p)?,
                None => " ",
            };
            let t = if f == F::TrimPrefix {
                s.strip_prefix(affix)
            } else {
                s.strip_suffix(affix)
            };
            owned(Value::from(t.unwrap_or(s)))
        }
        F::Replace => {
            let s = string_arg(f, a0)?;
            let old = string_arg(f, arg(1))?;
            let new = string_arg(f, arg(2))?;
            let n = match args.get(3) {
                Some(n) => int_arg(f, n)?,
                None => -1,
            };
            let hits = if old.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(old).count()
            };
            budget.charge_string(s.len().saturating_add(hits.saturating_mul(new.len())))?;
            owned(Value::String(go_replace(s, old, new, n)))
        }
        // strings.Repeat behind expr's guard (`builtin.go`: a count over 1e6 panics with
        // "memory budget exceeded"); a negative count panics in Go.
        F::Repeat => {
            let s = string_arg(f, a0)?;
            let n = int_arg(f, arg(1))?;
            if n < 0 {
                return Err(invalid(f, "negative Repeat count"));
            }
            if n > 1_000_000 {
                return Err(invalid(f, "memory budget exceeded"));
            }
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            budget.charge_string(s.len().saturating_mul(n))?;
            owned(Value::String(s.repeat(n)))
        }
        F::IndexOf | F::LastIndexOf => {
            let s = string_arg(f, a0)?;
            let sub = string_arg(f, arg(1))?;
            let at = if f == F::IndexOf {
                s.find(sub)
            } else {
                s.rfind(sub)
            };
            owned(Value::Int(at.map_or(-1, int_of_len)))
        }
        F::HasPrefix | F::HasSuffix => {
            let s = string_arg(f, a0)?;
            let affix = string_arg(f, arg(1))?;
            owned(Value::Bool(if f == F::HasPrefix {
                s.starts_with(affix)
            } else {
                s.ends_with(affix)
            }))
        }
        F::IsNaN | F::IsInf => match a0 {
            Value::Float(x) => owned(Value::Bool(if f == F::IsNaN {
                x.is_nan()
            } else {
                x.is_infinite()
            })),
            // Argo's isNaN takes a float64. An int-typed expression is refused by the type
            // check; an int that only shows at run time (`sum([])`, `#` over `[1, 2]`,
            // `first([1])`) fails Go's call ("interface conversion: interface {} is int, not
            // float64"). With a Prometheus result every int is such a value. In a JSON
            // result (a `compare` or web metric) an integer is a float64 to Argo, which
            // decodes JSON numbers so, and is never NaN or infinite.
            Value::Int(_) if prometheus_shaped(result) => Err(invalid(
                f,
                "interface conversion: interface {} is int, not float64",
            )),
            Value::Int(_) => owned(Value::Bool(false)),
            other => Err(invalid(
                f,
                format!("expected a number, got {}", other.type_name()),
            )),
        },
        // Argo's quirks: both ignore their first argument and look at `result` itself.
        F::IsNil => owned(Value::Bool(matches!(result, Value::Nil))),
        F::Default => {
            if matches!(result, Value::Nil) {
                Ok(args
                    .get(1)
                    .cloned()
                    .unwrap_or(Cow::Borrowed(&super::value::NIL)))
            } else {
                Ok(Cow::Borrowed(result))
            }
        }
        F::All
        | F::Any
        | F::None
        | F::One
        | F::Filter
        | F::Map
        | F::Count
        | F::Sum
        | F::Find
        | F::FindIndex
        | F::FindLast
        | F::FindLastIndex => Err(invalid(f, "needs a predicate")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(f: Function, args: Vec<Value>) -> Result<Value, ConditionError> {
        let budget = Budget::default();
        let args: Vec<Cow<'_, Value>> = args.into_iter().map(Cow::Owned).collect();
        apply(f, &args, &Value::Nil, &budget)
            .map(Cow::into_owned)
            .map_err(Flow::into_error)
    }

    #[test]
    fn every_name_round_trips() {
        for (name, f) in NAMES {
            assert_eq!(Function::lookup(name), Some(*f));
            assert_eq!(f.name(), *name);
        }
        assert_eq!(Function::lookup("nope"), None);
        assert!(Function::unsupported_hint("reduce").is_some());
        assert!(Function::unsupported_hint("len").is_none());
    }

    #[test]
    fn go_split_follows_split_n() {
        let strs = |v: Vec<Value>| -> Vec<String> { v.iter().map(|x| x.to_string()).collect() };
        assert_eq!(strs(go_split("a,b,c", ",", -1)), ["a", "b", "c"]);
        assert_eq!(strs(go_split("a,b,c", ",", 2)), ["a", "b,c"]);
        assert!(go_split("a,b,c", ",", 0).is_empty());
        assert_eq!(strs(go_split("héj", "", -1)), ["h", "é", "j"]);
        assert_eq!(strs(go_split("héj", "", 2)), ["h", "éj"]);
        assert_eq!(strs(go_split("", ",", -1)), [""]);
    }

    #[test]
    fn float_to_int_truncates_and_refuses_non_finite() {
        assert_eq!(float_to_int("int", 2.9).unwrap(), 2);
        assert_eq!(float_to_int("int", -2.9).unwrap(), -2);
        assert!(float_to_int("int", f64::NAN).is_err());
        assert!(float_to_int("int", f64::INFINITY).is_err());
        assert!(float_to_int("int", 1e19).is_err());
        assert_eq!(float_to_int("int", -(2f64.powi(63))).unwrap(), i64::MIN);
    }

    #[test]
    fn max_min_keep_the_winning_type() {
        let v = call(
            Function::Max,
            vec![Value::Int(1), Value::Float(2.5), Value::Int(2)],
        )
        .unwrap();
        assert_eq!(v, Value::Float(2.5));
        let v = call(Function::Min, vec![Value::Int(3), Value::Int(1)]).unwrap();
        assert_eq!(v, Value::Int(1));
        // expr 1.15.5's max/min take numbers, not arrays.
        assert!(call(Function::Max, vec![Value::from(vec![3i64, 1])]).is_err());
        assert!(call(Function::Max, vec![Value::from("a")]).is_err());
    }

    #[test]
    fn median_of_one_element_does_not_underflow() {
        // n / 2 - 1 used to be computed for n == 1 (a panic with overflow checks on).
        for one in [vec![4i64], vec![-1]] {
            let want = Value::Float(one[0] as f64);
            assert_eq!(
                call(Function::Median, vec![Value::from(one)]).unwrap(),
                want
            );
        }
        assert_eq!(
            call(
                Function::Median,
                vec![Value::from(vec![f64::NAN, 1.0, 2.0])]
            )
            .unwrap(),
            Value::Float(1.0),
            "NaN sorts first, as Go's sort.Float64s"
        );
        assert!(call(Function::Median, vec![Value::Float(1.0)]).is_err());
    }

    #[test]
    fn median_and_mean_of_empty_are_zero() {
        assert_eq!(
            call(Function::Mean, vec![Value::Array(vec![])]).unwrap(),
            Value::Float(0.0)
        );
        assert_eq!(
            call(Function::Median, vec![Value::Array(vec![])]).unwrap(),
            Value::Float(0.0)
        );
        assert_eq!(
            call(Function::Median, vec![Value::from(vec![4i64, 1, 3, 2])]).unwrap(),
            Value::Float(2.5)
        );
        assert_eq!(
            call(Function::Median, vec![Value::from(vec![5.0, 1.0, 3.0])]).unwrap(),
            Value::Float(3.0)
        );
    }

    #[test]
    fn string_functions() {
        let s = |v: &str| Value::from(v);
        assert_eq!(
            call(Function::Trim, vec![s("__a__"), s("_")]).unwrap(),
            s("a")
        );
        assert_eq!(
            call(Function::TrimPrefix, vec![s("HelloWorld"), s("Hello")]).unwrap(),
            s("World")
        );
        assert_eq!(call(Function::TrimSuffix, vec![s("a ")]).unwrap(), s("a"));
        assert_eq!(
            call(Function::Replace, vec![s("aXbX"), s("X"), s("-")]).unwrap(),
            s("a-b-")
        );
        assert_eq!(
            call(Function::IndexOf, vec![s("apple pie"), s("pie")]).unwrap(),
            Value::Int(6)
        );
        assert_eq!(
            call(Function::LastIndexOf, vec![s("a a"), s("z")]).unwrap(),
            Value::Int(-1)
        );
        assert_eq!(
            call(Function::Join, vec![Value::from(vec!["a", "b"]), s(",")]).unwrap(),
            s("a,b")
        );
        assert!(call(Function::Join, vec![Value::from(vec![1i64]), s(",")]).is_err());
        assert!(call(Function::Upper, vec![Value::Int(1)]).is_err());
    }

    #[test]
    fn sort_refuses_mixed_kinds() {
        let v = call(
            Function::Sort,
            vec![Value::from(vec![3.0, 1.0, 2.0]), Value::from("desc")],
        )
        .unwrap();
        assert_eq!(v, Value::from(vec![3.0, 2.0, 1.0]));
        let mixed = Value::Array(vec![Value::Int(1), Value::from("a")]);
        assert!(call(Function::Sort, vec![mixed]).is_err());
        assert!(call(
            Function::Sort,
            vec![Value::from(vec![1i64]), Value::from("up")]
        )
        .is_err());
    }
}
