//! `{{args.name}}` substitution, as Argo does it before a plugin ever sees the spec.

use std::collections::BTreeMap;

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
    substitute_within(value, args, path, &mut budget)
}

fn substitute_within(
    value: &Value,
    args: &ArgValues,
    path: &str,
    budget: &mut usize,
) -> Result<Value, SpecError> {
    Ok(match value {
        Value::String(s) => Value::String(expand(s, args, path, budget)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| substitute_within(v, args, &format!("{path}[{i}]"), budget))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let child = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    Ok((k.clone(), substitute_within(v, args, &child, budget)?))
                })
                .collect::<Result<_, SpecError>>()?,
        ),
        other => other.clone(),
    })
}

/// Substitutes the placeholders of one string (at most [`MAX_EXPANDED_BYTES`] once expanded).
pub fn substitute_str(text: &str, args: &ArgValues, path: &str) -> Result<String, SpecError> {
    let mut budget = MAX_EXPANDED_BYTES;
    expand(text, args, path, &mut budget)
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
