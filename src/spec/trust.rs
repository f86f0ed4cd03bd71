//! Where a template's credentials may go: only to an address the template's author wrote.
//!
//! A spec whose credentials come from files on the server (`bearerTokenFile`,
//! `basicAuth.passwordFile`, `oauth2.clientSecretFile`, `google.credentialsFile`), from the
//! metadata server (`google` without a key file) or from sensitive headers it writes out (`Authorization`, API
//! keys) sends them to its `prometheus.address`. When that address, or any part of it, comes
//! from an argument, whoever supplies the argument (a canary's metadata, a network caller)
//! chooses where the operator's credentials go. Such a template is refused where it is loaded
//! (`serve --templates`, `rollgate lint`).

use serde_json::Value;

use super::template::Template;
use crate::prometheus::is_sensitive_header;

/// What is wrong with `template`'s handling of credentials: one message per problem, each
/// naming its key; empty when nothing is.
pub fn template_problems(template: &Template) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, raw) in template.raw_metrics().iter().enumerate() {
        let Some(provider) = raw.get("provider") else {
            continue;
        };
        let path = format!("spec.metrics[{i}].provider");
        let mut configs: Vec<(String, &Value)> = Vec::new();
        if let Some(Value::Object(plugins)) = provider.get("plugin") {
            for (key, spec) in plugins {
                if let Some(p) = spec.get("prometheus") {
                    configs.push((format!("{path}.plugin.{key}.prometheus"), p));
                }
                for backend in crate::backends::BACKEND_KEYS {
                    if let Some(block) = spec.get(backend) {
                        let bpath = format!("{path}.plugin.{key}.{backend}");
                        backend_problems(&bpath, block, &mut problems);
                    }
                }
            }
        }
        if let Some(p) = provider.get("prometheus") {
            configs.push((format!("{path}.prometheus"), p));
        }
        for (ppath, p) in configs {
            config_problems(&ppath, p, &mut problems);
        }
    }
    problems
}

/// Another backend's block holds where its queries go and how they authenticate (API keys,
/// AWS identities, tokens): none of it may come from an argument, or whoever supplies the
/// argument chooses where the operator's credentials are sent or which are used.
fn backend_problems(path: &str, block: &Value, problems: &mut Vec<String>) {
    match block {
        Value::String(text) if text.contains("{{") => problems.push(format!(
            "{path}: {text:?} comes from an argument: a backend's address and credentials are the operator's, so write them in the template (see docs/security.md)"
        )),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                backend_problems(&format!("{path}[{i}]"), item, problems);
            }
        }
        Value::Object(map) => {
            for (key, value) in map {
                backend_problems(&format!("{path}.{key}"), value, problems);
            }
        }
        _ => {}
    }
}

fn has_placeholder(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.contains("{{"))
}

fn config_problems(path: &str, p: &Value, problems: &mut Vec<String>) {
    let mut credentials: Vec<String> = Vec::new();
    let mut file = |key: &str, value: Option<&Value>, problems: &mut Vec<String>| {
        if let Some(v) = value {
            credentials.push(key.to_string());
            if has_placeholder(v) {
                problems.push(format!(
                    "{path}.{key}: a credential file's path may not come from an argument (the caller would choose which server file is read and sent); write the path in the template"
                ));
            }
        }
    };
    file("bearerTokenFile", p.get("bearerTokenFile"), problems);
    file(
        "basicAuth.passwordFile",
        p.get("basicAuth").and_then(|b| b.get("passwordFile")),
        problems,
    );
    if let Some(o) = p.get("oauth2") {
        file(
            "oauth2.clientSecretFile",
            o.get("clientSecretFile"),
            problems,
        );
        file(
            "oauth2.clientAssertionFile",
            o.get("clientAssertionFile"),
            problems,
        );
        // The client secret goes to the token endpoint: its address is as much the
        // credential's destination as the Prometheus address is the token's.
        if let Some(url) = o.get("tokenUrl").filter(|u| has_placeholder(u)) {
            problems.push(format!(
                "{path}.oauth2.tokenUrl: {} comes from an argument while the client secret is sent there: whoever supplies the argument could have it sent to a server of its choosing; write the token URL in the template (see docs/security.md)",
                url.as_str().map(|a| format!("{a:?}")).unwrap_or_default(),
            ));
        }
    }
    if let Some(g) = p.get("google") {
        match g.get("credentialsFile") {
            Some(f) => file("google.credentialsFile", Some(f), problems),
            None => credentials.push("google metadata server token".to_string()),
        }
        if let Some(a) = g.get("metadataAddress").filter(|a| has_placeholder(a)) {
            problems.push(format!(
                "{path}.google.metadataAddress: {} comes from an argument: whoever supplies it would choose the token rollgate sends; write it in the template",
                a.as_str().map(|a| format!("{a:?}")).unwrap_or_default(),
            ));
        }
    }
    // SigV4 signs with the AWS identity of the machine that measures: the operator's.
    let argo_sigv4 = p.get("authentication").and_then(|a| a.get("sigv4"));
    if let Some(sigv4) = p.get("sigv4").or(argo_sigv4) {
        credentials.push("sigv4".to_string());
        if sigv4.get("profile").is_some_and(has_placeholder) {
            problems.push(format!(
                "{path}.sigv4.profile: the AWS profile may not come from an argument (the caller would choose which of the server's AWS identities signs); write it in the template"
            ));
        }
    }
    // A sensitive header written out in the template is the operator's credential; one whose
    // value is itself an argument is the caller's own.
    match p.get("headers") {
        Some(Value::Object(map)) => {
            for (name, value) in map {
                if is_sensitive_header(name) && !has_placeholder(value) {
                    credentials.push(format!("headers.{name}"));
                }
            }
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let name = item.get("key").and_then(Value::as_str).unwrap_or_default();
                let value = item.get("value").unwrap_or(&Value::Null);
                if is_sensitive_header(name) && !has_placeholder(value) {
                    credentials.push(format!("headers[{i}] ({name})"));
                }
            }
        }
        _ => {}
    }
    if credentials.is_empty() {
        return;
    }
    if let Some(address) = p.get("address").filter(|a| has_placeholder(a)) {
        problems.push(format!(
            "{path}.address: {} comes from an argument while the spec sends credentials ({}): whoever supplies the argument could have them sent to a server of its choosing; write the address in the template (see docs/security.md)",
            address.as_str().map(|a| format!("{a:?}")).unwrap_or_default(),
            credentials.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(prometheus: &str) -> Template {
        let text = format!(
            r#"
kind: AnalysisTemplate
metadata: {{name: t}}
spec:
  args: [{{name: prometheus}}, {{name: token}}]
  metrics:
    - name: m
      provider:
        plugin:
          rollgate/analysis:
            query: up
            noData: fail
            prometheus: {prometheus}
"#
        );
        Template::parse_all(&text, "t.yaml").unwrap().remove(0)
    }

    #[test]
    fn credentials_with_an_address_from_an_argument_are_refused() {
        for p in [
            r#"{address: "{{args.prometheus}}", bearerTokenFile: /var/run/token}"#,
            r#"{address: "http://{{args.prometheus}}:9090", basicAuth: {username: u, passwordFile: /p}}"#,
            r#"{address: "http://prom:9090/{{args.prometheus}}", headers: {Authorization: "Bearer x"}}"#,
        ] {
            let problems = template_problems(&template(p));
            assert_eq!(problems.len(), 1, "{p}: {problems:?}");
            assert!(
                problems[0].contains(".prometheus.address:"),
                "{}",
                problems[0]
            );
        }
    }

    #[test]
    fn credentials_with_a_written_address_or_none_are_fine() {
        for p in [
            r#"{address: "http://prom:9090", bearerTokenFile: /var/run/token}"#,
            r#"{bearerTokenFile: /var/run/token}"#,
            r#"{address: "{{args.prometheus}}"}"#,
            r#"{address: "{{args.prometheus}}", headers: {Authorization: "{{args.token}}", X-Scope-OrgID: tenant}}"#,
        ] {
            assert!(template_problems(&template(p)).is_empty(), "{p}");
        }
    }

    #[test]
    fn oauth2_and_google_credentials_go_only_where_the_template_says() {
        for (p, key) in [
            (
                r#"{address: "{{args.prometheus}}", oauth2: {tokenUrl: "http://t/token", clientId: c, clientSecretFile: /s}}"#,
                ".prometheus.address:",
            ),
            (
                r#"{address: "http://p:1", oauth2: {tokenUrl: "{{args.prometheus}}", clientId: c, clientSecretFile: /s}}"#,
                ".oauth2.tokenUrl:",
            ),
            (
                r#"{address: "http://p:1", oauth2: {tokenUrl: "http://t/token", clientId: c, clientSecretFile: "{{args.token}}"}}"#,
                ".oauth2.clientSecretFile: a credential file's path",
            ),
            (
                r#"{address: "{{args.prometheus}}", google: {credentialsFile: /k.json}}"#,
                ".prometheus.address:",
            ),
            (
                r#"{address: "http://{{args.prometheus}}", google: {metadata: true}}"#,
                ".prometheus.address:",
            ),
            (
                r#"{address: "http://p:1", google: {credentialsFile: "{{args.token}}"}}"#,
                ".google.credentialsFile: a credential file's path",
            ),
            (
                r#"{address: "http://p:1", google: {metadataAddress: "{{args.token}}"}}"#,
                ".google.metadataAddress:",
            ),
        ] {
            let problems = template_problems(&template(p));
            assert_eq!(problems.len(), 1, "{p}: {problems:?}");
            assert!(problems[0].contains(key), "{p}: {}", problems[0]);
        }
        for p in [
            r#"{address: "http://p:1", oauth2: {tokenUrl: "http://t/token", clientId: "{{args.token}}", clientSecretFile: /s}}"#,
            r#"{address: "http://p:1", google: {metadata: true}}"#,
        ] {
            assert!(template_problems(&template(p)).is_empty(), "{p}");
        }
    }

    #[test]
    fn sigv4_signs_as_the_server_so_its_address_and_profile_are_the_templates() {
        let problems = template_problems(&template(
            r#"{address: "{{args.prometheus}}", sigv4: {region: us-east-1}}"#,
        ));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(".prometheus.address:"), "{problems:?}");
        assert!(problems[0].contains("sigv4"), "{problems:?}");
        let problems = template_problems(&template(
            r#"{address: "https://aps.example", sigv4: {region: us-east-1, profile: "{{args.token}}"}}"#,
        ));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains(".sigv4.profile:"), "{problems:?}");
        assert!(template_problems(&template(
            r#"{address: "https://aps.example", sigv4: {region: "{{args.token}}"}}"#,
        ))
        .is_empty());
    }

    #[test]
    fn a_credential_files_path_from_an_argument_is_refused() {
        let problems = template_problems(&template(
            r#"{address: "http://p:1", bearerTokenFile: "{{args.token}}"}"#,
        ));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("bearerTokenFile: a credential file's path"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_backend_block_takes_no_argument() {
        let text = r#"
kind: AnalysisTemplate
metadata: {name: t}
spec:
  args: [{name: site}, {name: service}]
  metrics:
    - name: m
      provider:
        plugin:
          rollgate/analysis:
            query: "sum:errors{service:{{args.service}}}"
            noData: fail
            datadog: {address: "https://{{args.site}}", apiKeyFile: /k, appKeyFile: /a}
"#;
        let template = Template::parse_all(text, "t.yaml").unwrap().remove(0);
        let problems = template_problems(&template);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("spec.metrics[0].provider.plugin.rollgate/analysis.datadog.address:"),
            "{problems:?}"
        );
    }
}
