//! `rollgate rules` and `promtool` as the rule tests run them: the command's output, its YAML
//! documents, and promtool in a directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use serde_json::Value;

/// The repository root (examples/, manifests/).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `rollgate rules -f FILE ARGS...`.
pub fn rules(file: &Path, args: &[&str]) -> Output {
    Command::new(crate::support::rollgate_bin())
        .arg("rules")
        .arg("-f")
        .arg(file)
        .args(args)
        .output()
        .expect("run rollgate")
}

/// The YAML documents of the command's standard output.
pub fn documents(out: &Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// Runs `promtool ARGS...` in `dir` (`PROMTOOL` overrides the binary).
pub fn promtool(args: &[&str], dir: &Path) -> Output {
    Command::new(std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into()))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (Debian's prometheus package)")
}
