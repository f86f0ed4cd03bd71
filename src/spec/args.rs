//! `{{args.name}}` substitution, as Argo does it before a plugin ever sees the spec, with one
//! rule Argo lacks: an argument is a value, never syntax. Whoever supplies a value (a Flagger
//! canary's metadata, a web-provider or gRPC caller, `--arg`) may change only the literal it
//! stands in, never the query or condition around it (see [`check_value_use`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::error::SpecError;

/// Argument values by name; `None` marks a declared argument with no value (e.g. `valueFrom`).
pub type ArgValues = BTreeMap<String, Option<String>>;

/// Most bytes that the strings of one substitution may expand to. A spec is a few kilobytes;
/// without a bound, a request repeating a placeholder of a large argument would ask for
/// gigabytes.
pub(crate) const MAX_EXPANDED_BYTES: usize = 1 << 20;

/// Replaces every `{{args.name}}` (spaces inside the braces allowed) in every string of `value`.
/// A placeholder whose argument is unknown or has no value is an error naming it and the key,
/// and so is a result whose strings exceed [`MAX_EXPANDED_BYTES`] in all.
pub fn substitute(value: &Value, args: &ArgValues, path: &str) -> Result<Value, SpecError> {
    let mut budget = MAX_EXPANDED_BYTES;
    substitute_within(value, args, path, &mut budget, false)
}

/// `foreign`: `value` is (inside) a metric spec that names a backend other than Prometheus,
/// so its queries are not PromQL.
fn substitute_within(
    value: &Value,
    args: &ArgValues,
    path: &str,
    budget: &mut usize,
    foreign: bool,
) -> Result<Value, SpecError> {
    Ok(match value {
        Value::String(s) => {
            let out = expand(s, args, path, budget)?;
            if out != *s {
                check_value_use(s, args, path, foreign)?;
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| substitute_within(v, args, &format!("{path}[{i}]"), budget, foreign))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let foreign = foreign
                || crate::backends::BACKEND_KEYS
                    .iter()
                    .any(|k| map.contains_key(*k));
            Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let child = if path.is_empty() {
                            k.clone()
                        } else {
                            format!("{path}.{k}")
                        };
                        Ok((
                            k.clone(),
                            substitute_within(v, args, &child, budget, foreign)?,
                        ))
                    })
                    .collect::<Result<_, SpecError>>()?,
            )
        }
        other => other.clone(),
    })
}

/// Substitutes the placeholders of one string (at most [`MAX_EXPANDED_BYTES`] once expanded).
pub fn substitute_str(text: &str, args: &ArgValues, path: &str) -> Result<String, SpecError> {
    let mut budget = MAX_EXPANDED_BYTES;
    let out = expand(text, args, path, &mut budget)?;
    if out != text {
        check_value_use(text, args, path, false)?;
    }
    Ok(out)
}

/// Expands one string, spending its length from `budget`.
fn expand(
    text: &str,
    args: &ArgValues,
    path: &str,
    budget: &mut usize,
) -> Result<String, SpecError> {
    let mut out = String::with_capacity(text.len().min(*budget));
    let mut rest = text;
    let mut push = |out: &mut String, piece: &str| {
        *budget = budget
            .checked_sub(piece.len())
            .ok_or_else(|| SpecError::Invalid {
                path: path.to_string(),
                expected: format!(
                    "placeholders that expand to at most {MAX_EXPANDED_BYTES} bytes in all"
                ),
                got: format!("{:?} expanding further", super::error::shorten(text)),
            })?;
        out.push_str(piece);
        Ok::<(), SpecError>(())
    };
    while let Some(open) = rest.find("{{") {
        push(&mut out, &rest[..open])?;
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(SpecError::Invalid {
                path: path.to_string(),
                expected: "every {{ closed by }}".into(),
                got: format!("{:?}", super::error::shorten(text)),
            });
        };
        let tag = after[..close].trim();
        let Some(name) = tag.strip_prefix("args.") else {
            return Err(SpecError::Invalid {
                path: path.to_string(),
                expected: "placeholders of the form {{args.NAME}}".into(),
                got: format!("{{{{{}}}}}", super::error::shorten(tag)),
            });
        };
        match args.get(name) {
            Some(Some(v)) => push(&mut out, v)?,
            Some(None) => {
                return Err(SpecError::Missing {
                    path: format!("args.{name}"),
                    hint: format!("it has no value here (valueFrom is resolved only in a cluster); pass --arg {name}=VALUE"),
                })
            }
            None => {
                return Err(SpecError::Missing {
                    path: format!("args.{name}"),
                    hint: format!("{path} uses {{{{args.{name}}}}} but no such argument is declared or given"),
                })
            }
        }
        rest = &after[close + 2..];
    }
    push(&mut out, rest)?;
    Ok(out)
}

/// Fails when a caller supplies an argument that none of `declared` names: a typo such as
/// `max_ratio` for `max-ratio` would otherwise quietly judge against the default. The error
/// names the argument and lists the declared ones. Every surface that takes arguments (serve's
/// Flagger metadata and web provider, gRPC, `--arg` of the CLI) calls this before substituting.
pub fn check_declared<'a>(
    declared: impl IntoIterator<Item = &'a str>,
    supplied: impl IntoIterator<Item = &'a str>,
) -> Result<(), SpecError> {
    let declared: BTreeSet<&str> = declared.into_iter().collect();
    for name in supplied {
        if declared.contains(name) {
            continue;
        }
        let listed = if declared.is_empty() {
            "none are declared".to_string()
        } else {
            format!(
                "declared: {}",
                declared.iter().copied().collect::<Vec<_>>().join(", ")
            )
        };
        let hint = super::reader::closest(name, &declared)
            .map(|c| format!("; did you mean {c:?}?"))
            .unwrap_or_default();
        return Err(SpecError::Conflict {
            path: format!("args.{name}"),
            message: format!("no such argument ({listed}){hint}"),
        });
    }
    Ok(())
}

/// The argument names the `{{args.NAME}}` placeholders of `value` use: what an inline spec,
/// which declares no arguments, accepts.
pub fn placeholder_names(value: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    collect_names(value, &mut names);
    names
}

fn collect_names(value: &Value, names: &mut BTreeSet<String>) {
    match value {
        Value::String(s) => {
            names.extend(segments(s, false).into_iter().filter_map(|seg| match seg {
                Segment::Arg { name, .. } => Some(name.to_string()),
                _ => None,
            }))
        }
        Value::Array(items) => items.iter().for_each(|v| collect_names(v, names)),
        Value::Object(map) => map.values().for_each(|v| collect_names(v, names)),
        _ => {}
    }
}

/// What a value may be, by the key its placeholder sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A PromQL query: the substituted query must lex and parse as the template's does.
    Promql,
    /// A query in another backend's language (Datadog, InfluxQL, NRQL, Graphite, CloudWatch),
    /// which rollgate cannot parse: each value must be one plain token (letters, digits and
    /// `_ . : / -`), so that no value can add a clause, a quote, a wildcard or an operator.
    ForeignQuery,
    /// Argo's `successCondition` / `failureCondition`, which decide the verdict: a number (or
    /// `true`/`false`) outside quotes, a string without quotes, backslashes or control
    /// characters inside them.
    Condition,
    /// A header's name (Argo's `headers[].key`): never from an argument.
    HeaderName,
    /// A header's value: no control characters (no second header smuggled in).
    HeaderValue,
    /// Anything else: a scalar the spec reader then checks for its kind (a duration, a number,
    /// one of `noData`'s words, an address).
    Scalar,
}

/// Keys whose strings are PromQL, in every spec form (query, compare, fleet, Argo's provider).
const PROMQL_KEYS: [&str; 7] = [
    "query",
    "bad",
    "total",
    "canary",
    "stable",
    "selector",
    "expectedTargetsQuery",
];

const CONDITION_KEYS: [&str; 4] = [
    "successCondition",
    "failureCondition",
    "success_condition",
    "failure_condition",
];

fn place_of(path: &str) -> Place {
    let last = path.rsplit('.').next().unwrap_or(path);
    let key = last.split('[').next().unwrap_or(last);
    let in_headers = path
        .split('.')
        .any(|p| p == "headers" || p.starts_with("headers["));
    if in_headers && key == "key" && path.contains("headers[") {
        Place::HeaderName
    } else if in_headers {
        Place::HeaderValue
    } else if PROMQL_KEYS.contains(&key) {
        Place::Promql
    } else if CONDITION_KEYS.contains(&key) {
        Place::Condition
    } else {
        Place::Scalar
    }
}

/// Where a placeholder sits in the text around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// In the code itself: the value must be one literal token.
    Code,
    /// Inside a string literal opened by this quote.
    Quoted(char),
    /// In a PromQL `#` comment.
    Comment,
}

/// A piece of a template string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment<'t> {
    Text(&'t str),
    Arg {
        name: &'t str,
        context: Context,
    },
    /// A placeholder that is not an argument (another branch's run clock, `{{run.*}}`): left to
    /// whoever resolves it, and read as a sample duration by the structure check.
    Other(&'t str),
}

/// Splits `text` into literal text and placeholders, noting for each placeholder whether it
/// sits in code, in a quoted string or (PromQL only, `comments`) in a comment. Unclosed
/// placeholders end the scan: [`expand`] has already refused them.
fn segments(text: &str, comments: bool) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    let mut context = Context::Code;
    let mut start = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        // Byte-wise: `i` may sit inside a multi-byte character (an escape skips one byte), where
        // slicing `text` would panic; neither `{{` nor `[[` starts there.
        if bytes[i..].starts_with(b"{{") {
            let Some(close) = text[i + 2..].find("}}") else {
                break;
            };
            if start < i {
                out.push(Segment::Text(&text[start..i]));
            }
            let tag = text[i + 2..i + 2 + close].trim();
            out.push(match tag.strip_prefix("args.") {
                Some(name) => Segment::Arg { name, context },
                None => Segment::Other(&text[i..i + 4 + close]),
            });
            i += close + 4;
            start = i;
            continue;
        }
        if let Some(len) = text.get(i..).and_then(run_clock_len) {
            if start < i {
                out.push(Segment::Text(&text[start..i]));
            }
            out.push(Segment::Other(&text[i..i + len]));
            i += len;
            start = i;
            continue;
        }
        let c = bytes[i];
        match context {
            Context::Code => match c {
                b'"' | b'\'' | b'`' => context = Context::Quoted(char::from(c)),
                b'#' if comments => context = Context::Comment,
                _ => {}
            },
            Context::Quoted(q) => {
                if c == b'\\' && q != '`' && !bytes[i + 1..].starts_with(b"{{") {
                    // The escaped character (one byte or the first of several) is skipped;
                    // continuation bytes never match a quote.
                    i += 1;
                } else if char::from(c) == q {
                    context = Context::Code;
                }
            }
            Context::Comment => {
                if c == b'\n' {
                    context = Context::Code;
                }
            }
        }
        i += 1;
    }
    if start < text.len() {
        out.push(Segment::Text(&text[start..]));
    }
    out
}

/// The length of the run-clock placeholder (`[[run.elapsed]]`, spaces inside the brackets
/// allowed) at the start of `text`, if it is there. The engine substitutes it later with a
/// duration of its own, never a caller's value.
fn run_clock_len(text: &str) -> Option<usize> {
    let inner = text.strip_prefix("[[")?;
    let close = inner.find("]]")?;
    (inner[..close].trim() == "run.elapsed").then_some(close + 4)
}

/// What stands in for an argument where the structure of a PromQL template is read.
const SENTINEL_NAME: &str = "rollgate_arg_value";
const SENTINEL_NUMBER: &str = "123456789";
const SENTINEL_DURATION: &str = "123456789s";

/// A sample value for a placeholder that is not an argument (the run clock `[[run.elapsed]]`,
/// always a duration such as `3600s`), so that the structure check can parse the query around
/// it.
fn other_placeholder_sample(_tag: &str) -> &'static str {
    "60s"
}

fn is_number(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    let (mantissa, exponent) = match v.find(['e', 'E']) {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    let digits = mantissa.bytes().filter(u8::is_ascii_digit).count();
    let dots = mantissa.bytes().filter(|b| *b == b'.').count();
    let mantissa_ok = digits > 0 && dots <= 1 && digits + dots == mantissa.len();
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

fn is_duration(v: &str) -> bool {
    let mut rest = v;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h", "d", "w", "y"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

fn is_name(v: &str) -> bool {
    let mut chars = v.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// The neutral literal of the value's own kind, for a placeholder in PromQL code; `None` when
/// the value is not one literal token.
fn code_sentinel(value: &str) -> Option<String> {
    if is_number(value) {
        let sign = value.strip_suffix(value.trim_start_matches(['-', '+']));
        Some(format!("{}{SENTINEL_NUMBER}", sign.unwrap_or("")))
    } else if is_duration(value) {
        Some(SENTINEL_DURATION.to_string())
    } else if is_name(value) {
        Some(SENTINEL_NAME.to_string())
    } else {
        None
    }
}

fn refused(name: &str, value: &str, expected: String) -> SpecError {
    SpecError::Invalid {
        path: format!("args.{name}"),
        expected,
        got: format!("{:?}", super::error::shorten(value)),
    }
}

/// Checks that the values `text`'s placeholders take from `args` stay values where they
/// land (see [`Place`]); the error names the first argument that would not. `path` is the key
/// of `text`, which decides the rule.
fn check_value_use(
    text: &str,
    args: &ArgValues,
    path: &str,
    foreign: bool,
) -> Result<(), SpecError> {
    let place = match place_of(path) {
        Place::Promql if foreign => Place::ForeignQuery,
        place => place,
    };
    if place == Place::Scalar {
        return Ok(());
    }
    let segs = segments(text, place == Place::Promql);
    let value_of = |name: &str| args.get(name).cloned().flatten().unwrap_or_default();
    for seg in &segs {
        let Segment::Arg { name, context } = *seg else {
            continue;
        };
        let value = value_of(name);
        match (place, context) {
            (Place::HeaderName, _) => {
                return Err(refused(
                    name,
                    &value,
                    format!("no argument in a header's name ({path}): write the name in the spec"),
                ))
            }
            (Place::HeaderValue, _) if value.chars().any(char::is_control) => {
                return Err(refused(
                    name,
                    &value,
                    format!("a header value without control characters ({path})"),
                ))
            }
            (Place::Condition, Context::Code)
                if !(is_number(&value) || value == "true" || value == "false") =>
            {
                return Err(refused(
                    name,
                    &value,
                    format!("a number (or true/false) where it stands in the condition {path}: arguments are values, never expressions"),
                ))
            }
            (Place::Condition, Context::Quoted(q))
                if value.chars().any(|c| c == q || c == '\\' || c.is_control()) =>
            {
                return Err(refused(
                    name,
                    &value,
                    format!("text without {q}, backslashes or control characters inside the quoted string of the condition {path}"),
                ))
            }
            (Place::ForeignQuery, _) if !is_plain_token(&value) => {
                return Err(refused(
                    name,
                    &value,
                    format!("one plain token (letters, digits, `_`, `.`, `:`, `/`, `-`) in {path}: arguments are values, never query syntax"),
                ))
            }
            (Place::Promql, Context::Code) if code_sentinel(&value).is_none() => {
                return Err(refused(
                    name,
                    &value,
                    format!("one number, duration or name where it stands outside quotes in {path}: arguments are values, never PromQL"),
                ))
            }
            _ => {}
        }
    }
    if place == Place::Promql {
        check_promql_structure(&segs, &value_of, path)?;
    }
    Ok(())
}

/// Whether `value` is one plain token of another backend's query: a name, number, tag value
/// or path segment, never a quote, space, bracket, wildcard, comma or operator.
fn is_plain_token(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'/' | b'-'))
}

/// The query with each argument replaced by `fill(name, context)`.
fn assemble(segs: &[Segment<'_>], mut fill: impl FnMut(&str, Context) -> String) -> String {
    let mut out = String::new();
    for seg in segs {
        match *seg {
            Segment::Text(t) => out.push_str(t),
            Segment::Arg { name, context } => out.push_str(&fill(name, context)),
            Segment::Other(tag) => out.push_str(other_placeholder_sample(tag)),
        }
    }
    out
}

fn sentinel(value: &str, context: Context) -> String {
    match context {
        Context::Code => code_sentinel(value).unwrap_or_else(|| SENTINEL_NAME.to_string()),
        Context::Quoted(_) | Context::Comment => SENTINEL_NAME.to_string(),
    }
}

/// PromQL tokens: kind and text. `None` when the text does not lex.
fn tokens(text: &str) -> Option<Vec<(u16, String)>> {
    use lrpar::{Lexeme, Lexer};
    let lex = || -> Option<Vec<(u16, String)>> {
        let lexer = promql_parser::parser::lexer(text).ok()?;
        lexer
            .iter()
            .map(|l| {
                let l = l.ok()?;
                let span = l.span();
                Some((l.tok_id(), text.get(span.start()..span.end())?.to_string()))
            })
            .collect()
    };
    // The lexer is third-party code fed with caller text: a panic is a refusal, not a crash.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(lex)).unwrap_or(None)
}

/// Whether `real` has the token structure of `template`: the same tokens in the same order,
/// each with the same text, except literals that hold a sentinel (where a value stands).
fn same_structure(template: &[(u16, String)], real: &[(u16, String)]) -> bool {
    template.len() == real.len()
        && template.iter().zip(real).all(|((tk, tt), (rk, rt))| {
            tk == rk && (tt == rt || tt.contains(SENTINEL_NAME) || tt.contains(SENTINEL_NUMBER))
        })
}

/// The PromQL rule: with a neutral literal of its kind in place of every argument the template
/// must parse, and the query with the real values must have the template's tokens, literals
/// aside. Token equality is stricter than comparing parse trees and implies it: the parser
/// sees the same token kinds in the same order, so only literal values differ.
fn check_promql_structure(
    segs: &[Segment<'_>],
    value_of: &dyn Fn(&str) -> String,
    path: &str,
) -> Result<(), SpecError> {
    let neutral = assemble(segs, |name, context| sentinel(&value_of(name), context));
    let first_arg = segs.iter().find_map(|s| match s {
        Segment::Arg { name, .. } => Some(*name),
        _ => None,
    });
    let Some(first_arg) = first_arg else {
        return Ok(());
    };
    let template_tokens = match super::promql::parse_promql(path, &neutral, |_| ()) {
        Ok(()) => tokens(&neutral),
        Err(_) => None,
    };
    let Some(template_tokens) = template_tokens else {
        // The values' kinds do not fit where they stand (a name where a number goes).
        let name = segs
            .iter()
            .find_map(|s| match s {
                Segment::Arg {
                    name,
                    context: Context::Code,
                } => Some(*name),
                _ => None,
            })
            .unwrap_or(first_arg);
        // No literal of any kind fits there: the template's query is what is broken, not
        // the value.
        let fits_some_literal = [SENTINEL_NUMBER, SENTINEL_DURATION, SENTINEL_NAME]
            .into_iter()
            .any(|literal| {
                let with_literal = assemble(segs, |n, context| {
                    if n == name {
                        literal.to_string()
                    } else {
                        sentinel(&value_of(n), context)
                    }
                });
                super::promql::parse_promql(path, &with_literal, |_| ()).is_ok()
            });
        if !fits_some_literal {
            let written = assemble(segs, |n, _| format!("{{{{args.{n}}}}}"));
            return Err(SpecError::Invalid {
                path: path.to_string(),
                expected: "a valid PromQL query (it does not parse whatever literal stands for its arguments)".into(),
                got: format!("{:?}", super::error::shorten(&written)),
            });
        }
        return Err(refused(
            name,
            &value_of(name),
            format!("a literal of the kind its place in {path} takes (the query does not parse with a neutral value of this kind there)"),
        ));
    };
    // A name where a number or duration would parse turns a literal into a selector (`> up`):
    // a name is a value only where no literal could stand.
    for seg in segs {
        let Segment::Arg {
            name,
            context: Context::Code,
        } = *seg
        else {
            continue;
        };
        if !is_name(&value_of(name)) {
            continue;
        }
        for literal in [SENTINEL_NUMBER, SENTINEL_DURATION] {
            let with_literal = assemble(segs, |n, context| {
                if n == name {
                    literal.to_string()
                } else {
                    sentinel(&value_of(n), context)
                }
            });
            if super::promql::parse_promql(path, &with_literal, |_| ()).is_ok() {
                return Err(refused(
                    name,
                    &value_of(name),
                    format!("a number or duration where it stands in {path}: a name there would make the literal a query"),
                ));
            }
        }
    }
    // Each argument alone with its real value, the others neutral: the error names the one
    // that changes the structure.
    let mut seen = BTreeSet::new();
    for seg in segs {
        let Segment::Arg { name, .. } = *seg else {
            continue;
        };
        if !seen.insert(name) {
            continue;
        }
        let one = assemble(segs, |n, context| {
            if n == name {
                value_of(n)
            } else {
                sentinel(&value_of(n), context)
            }
        });
        if !tokens(&one).is_some_and(|t| same_structure(&template_tokens, &t)) {
            return Err(structure_changed(name, &value_of(name), path));
        }
    }
    let real = assemble(segs, |n, _| value_of(n));
    if !tokens(&real).is_some_and(|t| same_structure(&template_tokens, &t)) {
        return Err(structure_changed(first_arg, &value_of(first_arg), path));
    }
    // The lexer takes what the parser refuses (a raw newline inside a string literal): a value
    // must leave the query valid, so that the refusal names it rather than the query.
    if super::promql::parse_promql(path, &real, |_| ()).is_err() {
        let name = segs
            .iter()
            .find_map(|s| match s {
                Segment::Arg { name, .. } => {
                    let one = assemble(segs, |n, context| {
                        if n == *name {
                            value_of(n)
                        } else {
                            sentinel(&value_of(n), context)
                        }
                    });
                    super::promql::parse_promql(path, &one, |_| ())
                        .is_err()
                        .then_some(*name)
                }
                _ => None,
            })
            .unwrap_or(first_arg);
        return Err(refused(
            name,
            &value_of(name),
            format!("a value that leaves {path} valid PromQL"),
        ));
    }
    Ok(())
}

fn structure_changed(name: &str, value: &str, path: &str) -> SpecError {
    refused(
        name,
        value,
        format!("a value that changes only the literal it stands in, not the structure of the query {path}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(pairs: &[(&str, Option<&str>)]) -> ArgValues {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn substitutes_in_nested_strings() {
        let v = json!({"query": "rate(x{svc=\"{{args.service}}\"}[{{ args.window }}])", "list": ["{{args.service}}"], "n": 3});
        let out = substitute(
            &v,
            &args(&[("service", Some("pay")), ("window", Some("5m"))]),
            "",
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"query": "rate(x{svc=\"pay\"}[5m])", "list": ["pay"], "n": 3})
        );
    }

    #[test]
    fn expansion_is_bounded_in_all_strings_together() {
        let big = "x".repeat(100_000);
        let a = args(&[("big", Some(big.as_str()))]);
        // Nine strings of 100 kB fit; the same in one string repeated 11 times does not.
        let fits = Value::Array(vec![json!("{{args.big}}"); 9]);
        assert_eq!(
            substitute(&fits, &a, "spec").unwrap()[8]
                .as_str()
                .unwrap()
                .len(),
            100_000
        );
        let many = Value::Array(vec![json!("{{args.big}}"); 100_000]);
        let err = substitute(&many, &a, "spec").unwrap_err().to_string();
        assert!(
            err.starts_with("spec[10]: expected placeholders that expand to at most 1048576 bytes"),
            "{err}"
        );
        let err = substitute_str(&"{{args.big}}".repeat(100_000), &a, "query")
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 1048576 bytes"), "{err}");
        assert!(err.len() < 400, "the message quotes only the start: {err}");
    }

    #[test]
    fn missing_and_valueless_args_are_named() {
        let v = json!({"query": "x{a=\"{{args.nope}}\"}"});
        let err = substitute(&v, &args(&[]), "spec").unwrap_err().to_string();
        assert!(err.starts_with("args.nope: is required"), "{err}");
        assert!(err.contains("spec.query"), "{err}");
        let err = substitute_str("{{args.secret}}", &args(&[("secret", None)]), "q")
            .unwrap_err()
            .to_string();
        assert!(err.contains("--arg secret=VALUE"), "{err}");
    }

    #[test]
    fn unclosed_and_foreign_placeholders_fail() {
        assert!(substitute_str("{{args.a", &args(&[("a", Some("1"))]), "q").is_err());
        assert!(substitute_str("{{workflow.name}}", &args(&[]), "q").is_err());
        assert_eq!(
            substitute_str("no tags }} here", &args(&[]), "q").unwrap(),
            "no tags }} here"
        );
    }
}

#[cfg(test)]
mod value_tests {
    use super::*;
    use proptest::prelude::*;

    const ERROR_RATE: &str = r#"sum(rate(http_requests_total{service="{{args.service}}",code=~"5.."}[{{args.window}}])) / sum(rate(http_requests_total{service="{{args.service}}"}[{{args.window}}])) > {{args.floor}}"#;

    fn values(service: &str, window: &str, floor: &str) -> ArgValues {
        [("service", service), ("window", window), ("floor", floor)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    fn query(service: &str) -> Result<String, SpecError> {
        substitute_str(ERROR_RATE, &values(service, "5m", "0"), "spec.query")
    }

    #[test]
    fn the_injection_through_a_label_value_is_refused_naming_the_argument() {
        let attack = r#"payments-canary"}[5m])) > 10000 or vector(0.001) #"#;
        let err = query(attack).unwrap_err().to_string();
        assert!(
            err.starts_with("args.service: expected a value that changes only the literal"),
            "{err}"
        );
        assert!(err.contains("spec.query"), "{err}");
    }

    #[test]
    fn plain_and_escaped_values_stay_literals() {
        for ok in [
            "payments",
            "payments-canary",
            "pay.ments",
            "a b",
            "ünïcødé",
            r#"a\"b"#,
            "}",
            "#",
            "a,b=c",
        ] {
            query(ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        substitute_str(ERROR_RATE, &values("p", "1h30m", "-0.5"), "spec.query").unwrap();
        substitute_str(ERROR_RATE, &values("p", "5m", "1e-3"), "spec.query").unwrap();
    }

    #[test]
    fn values_outside_quotes_are_single_literals_of_their_place() {
        for (window, floor) in [
            ("5m] or vector(1", "0"),
            ("5m", "0 or vector(1)"),
            ("5m", "up"),
            ("up", "0"),
            ("5m", "bool 0"),
        ] {
            let e = substitute_str(ERROR_RATE, &values("p", window, floor), "spec.query");
            assert!(e.is_err(), "{window:?} {floor:?}: {e:?}");
        }
        let e = substitute_str(ERROR_RATE, &values("p", "5m", "(1)"), "spec.query")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("args.floor:"), "{e}");
    }

    #[test]
    fn the_run_clock_is_a_duration_to_the_check() {
        let text = r#"sum(increase(x{svc="{{args.s}}"}[[[run.elapsed]]])) > {{args.n}}"#;
        let args: ArgValues = [("s", "pay"), ("n", "3")]
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .into();
        let out = substitute_str(text, &args, "spec.query").unwrap();
        assert_eq!(out, r#"sum(increase(x{svc="pay"}[[[run.elapsed]]])) > 3"#);
        let args: ArgValues = [("s", "pay\"}[1m])) or vector(1) #"), ("n", "3")]
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .into();
        assert!(substitute_str(text, &args, "spec.query").is_err());
    }

    #[test]
    fn another_backends_query_takes_one_plain_token_per_argument() {
        let spec = |service: &str| {
            let value = serde_json::json!({
                "datadog": {"apiKeyFile": "/k"},
                "query": "sum:trace.http.request.errors{service:{{args.s}}}.as_count()",
                "minRequests": {"query": "sum:trace.http.request.hits{service:{{args.s}}}", "count": 10},
            });
            let args: ArgValues = [("s".to_string(), Some(service.to_string()))].into();
            substitute(&value, &args, "spec")
        };
        let ok = spec("payments-canary").unwrap();
        assert_eq!(
            ok["query"],
            "sum:trace.http.request.errors{service:payments-canary}.as_count()"
        );
        // Each would change the query's structure: a second scope, a wildcard, a new clause.
        for attack in ["x},sum:fake{*", "*", "x OR y", "x\"", "a(b)", ""] {
            let err = spec(attack).unwrap_err().to_string();
            assert!(
                err.starts_with("args.s: expected one plain token"),
                "{attack}: {err}"
            );
        }
        // Not PromQL: the same value in a spec without a backend block goes by the PromQL rule.
        let promql = serde_json::json!({"query": "up{service=\"{{args.s}}\"}"});
        let args: ArgValues = [("s".to_string(), Some("x OR y".to_string()))].into();
        assert!(substitute(&promql, &args, "spec").is_ok());
    }

    #[test]
    fn a_value_in_a_comment_cannot_start_a_new_line() {
        let text = "up # by {{args.who}}";
        let args: ArgValues = [("who".to_string(), Some("x\nor vector(1)".to_string()))].into();
        assert!(substitute_str(text, &args, "query").is_err());
        let args: ArgValues = [("who".to_string(), Some("anyone".to_string()))].into();
        assert_eq!(
            substitute_str(text, &args, "query").unwrap(),
            "up # by anyone"
        );
    }

    #[test]
    fn conditions_take_numbers_and_plain_strings() {
        let args = |v: &str| -> ArgValues { [("max".to_string(), Some(v.to_string()))].into() };
        let cond = "result[0] < {{args.max}}";
        substitute_str(cond, &args("0.01"), "successCondition").unwrap();
        for bad in ["1 || true", "result[0]", "0.01 or true", "1)"] {
            let e = substitute_str(cond, &args(bad), "metric.success_condition").unwrap_err();
            assert!(e.to_string().starts_with("args.max:"), "{e}");
        }
        let quoted = r#"result[0] == "{{args.max}}""#;
        substitute_str(quoted, &args("ok"), "failureCondition").unwrap();
        assert!(substitute_str(quoted, &args(r#"x" || true || ""#), "failureCondition").is_err());
    }

    #[test]
    fn headers_take_plain_values_and_no_names() {
        let args: ArgValues = [("t".to_string(), Some("a\r\nX-Other: 1".to_string()))].into();
        assert!(
            substitute_str("{{args.t}}", &args, "spec.prometheus.headers.X-Scope-OrgID").is_err()
        );
        let args: ArgValues = [("t".to_string(), Some("tenant".to_string()))].into();
        substitute_str("{{args.t}}", &args, "spec.prometheus.headers.X-Scope-OrgID").unwrap();
        assert!(substitute_str("{{args.t}}", &args, "provider.prometheus.headers[0].key").is_err());
        substitute_str("{{args.t}}", &args, "provider.prometheus.headers[0].value").unwrap();
    }

    #[test]
    fn undeclared_arguments_are_named_with_the_declared_ones() {
        let e = check_declared(["max-ratio", "service"], ["service", "max_ratio"])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "args.max_ratio: no such argument (declared: max-ratio, service); did you mean \"max-ratio\"?");
        let e = check_declared([], ["x"]).unwrap_err().to_string();
        assert!(e.contains("none are declared"), "{e}");
        check_declared(["a", "b"], ["b"]).unwrap();
        let names = placeholder_names(
            &serde_json::json!({"q": "x{a=\"{{args.a}}\"}[{{ args.w }}]", "n": ["{{args.b}}"]}),
        );
        assert_eq!(names.into_iter().collect::<Vec<_>>(), vec!["a", "b", "w"]);
    }

    /// Pieces a hostile value is built from: quotes, braces, brackets, comments, newlines,
    /// operators, PromQL keywords, escapes and non-ASCII text.
    fn hostile() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\"".to_string()),
            Just("'".to_string()),
            Just("`".to_string()),
            Just("}".to_string()),
            Just("{".to_string()),
            Just("]".to_string()),
            Just("[5m]".to_string()),
            Just(")".to_string()),
            Just("#".to_string()),
            Just("\n".to_string()),
            Just("\\".to_string()),
            Just(" or vector(0.001)".to_string()),
            Just(" > 10000".to_string()),
            Just(" unless ".to_string()),
            Just("offset 1h".to_string()),
            Just(",code=~\".*\"".to_string()),
            Just("{{".to_string()),
            Just("payments-canary".to_string()),
            Just("5m".to_string()),
            Just("0.5".to_string()),
            Just("ñ€😀".to_string()),
            "[a-z0-9 ]{0,4}",
        ];
        prop::collection::vec(piece, 0..6).prop_map(|p| p.concat())
    }

    /// The parse of `q` with every literal value blanked out: what the structure is.
    fn shape(q: &str) -> Option<String> {
        let expr = promql_parser::parser::parse(q).ok()?;
        let text = format!("{expr:?}");
        // Literal values appear in the debug form as quoted strings and numbers; blank both.
        let strings = regex::Regex::new(r#""(?:[^"\\]|\\.)*""#).ok()?;
        // Numbers and durations (`range: 500ms`, `300s`: a number may stand for seconds).
        let numbers = regex::Regex::new(r"\b\d+(\.\d+)?(e[-+]?\d+)?[a-z]*\b").ok()?;
        let t = strings.replace_all(&text, "S");
        Some(numbers.replace_all(&t, "N").into_owned())
    }

    #[test]
    fn an_escape_before_a_multibyte_character_is_not_a_crash() {
        // Found by the grpc_messages fuzz target: an escape skips one byte, which can land
        // inside a character.
        let args: ArgValues = [("s".to_string(), Some("v".to_string()))].into();
        let q = "sum(x{a=\"\\\u{e9}{{args.s}}\"})";
        // Refused or not (`\\é` is no PromQL escape), but answered: before, this panicked.
        let _ = substitute_str(q, &args, "spec.query");
        let _ = substitute_str("result[\u{420} < 0.01\"{{args.}}q", &args, "spec.query");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever the values, a substituted query is refused or parses to the template's
        /// structure (literal values aside).
        #[test]
        fn a_substituted_query_is_refused_or_keeps_the_templates_structure(
            service in hostile(), window in hostile(), floor in hostile()
        ) {
            let template_shape = shape(
                &substitute_str(ERROR_RATE, &values("s", "5m", "1"), "spec.query").unwrap()
            ).unwrap();
            if let Ok(q) = substitute_str(ERROR_RATE, &values(&service, &window, &floor), "spec.query") {
                let got = shape(&q);
                prop_assert_eq!(got.as_deref(), Some(template_shape.as_str()), "query {:?}", q);
            }
        }
    }
}
