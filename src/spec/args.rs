//! `{{args.name}}` substitution, as Argo does it before a plugin ever sees the spec.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::SpecError;

/// Argument values by name; `None` marks a declared argument with no value (e.g. `valueFrom`).
pub type ArgValues = BTreeMap<String, Option<String>>;

/// Replaces every `{{args.name}}` (spaces inside the braces allowed) in every string of `value`.
/// A placeholder whose argument is unknown or has no value is an error naming it and the key.
pub fn substitute(value: &Value, args: &ArgValues, path: &str) -> Result<Value, SpecError> {
    Ok(match value {
        Value::String(s) => Value::String(substitute_str(s, args, path)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| substitute(v, args, &format!("{path}[{i}]")))
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
                    Ok((k.clone(), substitute(v, args, &child)?))
                })
                .collect::<Result<_, SpecError>>()?,
        ),
        other => other.clone(),
    })
}

/// Substitutes the placeholders of one string.
pub fn substitute_str(text: &str, args: &ArgValues, path: &str) -> Result<String, SpecError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(SpecError::Invalid {
                path: path.to_string(),
                expected: "every {{ closed by }}".into(),
                got: format!("{text:?}"),
            });
        };
        let tag = after[..close].trim();
        let Some(name) = tag.strip_prefix("args.") else {
            return Err(SpecError::Invalid {
                path: path.to_string(),
                expected: "placeholders of the form {{args.NAME}}".into(),
                got: format!("{{{{{tag}}}}}"),
            });
        };
        match args.get(name) {
            Some(Some(v)) => out.push_str(v),
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
    out.push_str(rest);
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
