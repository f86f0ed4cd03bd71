//! `rollgate lint PATH...`: checks template files without a Prometheus. The rules are the
//! spec layer's ([`crate::spec::lint`]); this command finds the files and prints the findings.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::spec::lint::{lint_files, Finding, Severity};

use super::exit;
use super::stdout::outln;

/// Arguments of `rollgate lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// Template files or directories (searched recursively for *.yaml / *.yml holding
    /// templates): AnalysisTemplate, ClusterAnalysisTemplate, serve's ConfigMap, several
    /// documents per file.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,

    /// Output format: `text`, `json`, or `github` (workflow annotations on the lines).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = LintFormat::Text)]
    pub output: LintFormat,
}

/// How findings are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// One line per finding, then a summary.
    Text,
    /// One JSON document.
    Json,
    /// GitHub Actions workflow commands (`::error file=...,line=...::message`).
    Github,
}

/// Runs the lint; exit 0 clean (warnings allowed), 1 with errors, 64 for paths that cannot be read.
pub(crate) fn run(args: LintArgs) -> u8 {
    let mut files: Vec<(String, String)> = Vec::new();
    for path in &args.paths {
        if path.is_dir() {
            match templates_under(path) {
                Ok(found) => files.extend(found),
                Err(e) => {
                    eprintln!("rollgate lint: cannot read {}: {e}", path.display());
                    return exit::USAGE;
                }
            }
        } else {
            match std::fs::read_to_string(path) {
                Ok(text) => files.push((path.display().to_string(), text)),
                Err(e) => {
                    eprintln!("rollgate lint: cannot read {}: {e}", path.display());
                    return exit::USAGE;
                }
            }
        }
    }
    let lints = lint_files(&files);
    let findings: Vec<&Finding> = lints.iter().flat_map(|l| &l.findings).collect();
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings.len() - errors;
    let templates: usize = lints.iter().map(|l| l.templates).sum();
    match args.output {
        LintFormat::Text => {
            for f in &findings {
                outln!("{f}");
            }
            outln!(
                "{} in {} in {}",
                counted(errors, "error", "errors")
                    + ", "
                    + &counted(warnings, "warning", "warnings"),
                counted(templates, "template", "templates"),
                counted(files.len(), "file", "files"),
            );
        }
        LintFormat::Json => {
            let doc = json!({
                "files": files.len(),
                "templates": templates,
                "errors": errors,
                "warnings": warnings,
                "findings": findings.iter().map(|f| json!({
                    "severity": f.severity.as_str(),
                    "file": f.source,
                    "line": f.line,
                    "template": f.template,
                    "metric": f.metric,
                    "path": f.path,
                    "message": f.message,
                })).collect::<Vec<_>>(),
            });
            outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        LintFormat::Github => {
            for f in &findings {
                outln!("{}", github_annotation(f));
            }
        }
    }
    if errors > 0 {
        exit::FAILED
    } else {
        exit::SUCCESSFUL
    }
}

/// "1 error", "1,024 errors".
fn counted(n: usize, one: &str, many: &str) -> String {
    format!(
        "{} {}",
        crate::engine::result::format_count(n as f64),
        if n == 1 { one } else { many }
    )
}

/// One finding as a GitHub Actions workflow command.
fn github_annotation(f: &Finding) -> String {
    // A ConfigMap's template is named `file (data.KEY)`; the annotation needs the file.
    let file = f.source.split(" (data.").next().unwrap_or(&f.source);
    let mut props = format!("file={}", escape_property(file));
    if let Some(line) = f.line {
        props.push_str(&format!(",line={line}"));
    }
    let mut title = String::from("rollgate lint");
    if let Some(t) = &f.template {
        title.push_str(&format!(" {t}"));
    }
    if let Some(m) = &f.metric {
        title.push_str(&format!("/{m}"));
    }
    props.push_str(&format!(",title={}", escape_property(&title)));
    format!(
        "::{} {props}::{}",
        f.severity.as_str(),
        escape_data(&f.message)
    )
}

/// GitHub's escaping of a workflow command's message.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub's escaping of a workflow command's property values.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The YAML files under `dir` that hold templates (files of other kinds in a GitOps repo are
/// not lint's business when a directory is given), sorted; hidden entries skipped.
fn templates_under(dir: &Path) -> std::io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&d)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                !p.file_name()
                    .and_then(|n| n.to_str())
                    .is_none_or(|n| n.starts_with('.'))
            })
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml")
            {
                let text = std::fs::read_to_string(&p)?;
                if mentions_templates(&text) {
                    out.push((p.display().to_string(), text));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether a file found in a directory is one lint reads: it names a template kind.
fn mentions_templates(text: &str) -> bool {
    text.contains("AnalysisTemplate")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_escape_newlines_and_separators() {
        let f = Finding {
            severity: Severity::Error,
            source: "a,b.yaml (data.t.yaml)".into(),
            line: Some(3),
            template: Some("t".into()),
            metric: Some("m".into()),
            path: "x".into(),
            message: "50% bad\nsecond line".into(),
        };
        assert_eq!(
            github_annotation(&f),
            "::error file=a%2Cb.yaml,line=3,title=rollgate lint t/m::50%25 bad%0Asecond line"
        );
    }
}
