//! The templates `serve` answers from: every AnalysisTemplate / ClusterAnalysisTemplate in a
//! directory, validated as a whole, swapped in atomically on reload.
//!
//! A reload that finds any broken file keeps the set in use: a half-valid set would make
//! hooks that worked a minute ago fail with "unknown template".

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::spec::lint::{lint_text, Severity};
use crate::spec::{Metric, Provider, SpecError, Template};

/// Arguments every Flagger hook supplies (the canary's name and namespace), whether or not the
/// template uses them: never an undeclared argument.
pub(crate) const IMPLICIT_ARGS: [&str; 2] = ["name", "namespace"];

/// Most resolved (template, arguments) pairs kept; the cache starts over when it is full.
const CACHE_ENTRIES: usize = 512;

/// One loaded template and the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct LoadedTemplate {
    /// The parsed template (placeholders unresolved).
    pub template: Template,
    /// The file that defined it.
    pub file: PathBuf,
}

/// Resolved metrics of one template, shared by the requests that ask for them.
pub(crate) type Resolved = Arc<Vec<Arc<Metric>>>;

/// The template's name and its arguments sorted by name, each piece prefixed with its length
/// (so that no two selections share a key whatever their text): one string, hashed and
/// compared in one pass.
type CacheKey = String;

/// A validated set of templates, by name.
#[derive(Debug, Default)]
pub struct TemplateSet {
    templates: BTreeMap<String, LoadedTemplate>,
    /// Things worth knowing that do not make the set invalid (logged on load).
    pub warnings: Vec<String>,
    /// Lint errors of the set (`rollgate lint`'s rules), one line each: a set with any is
    /// loaded but not ready (`/readyz` answers 503 naming them), and `--strict` refuses it.
    pub lint_errors: Vec<String>,
    /// Resolved metrics by (template, arguments): resolving parses PromQL and conditions,
    /// which costs far more than a cached answer, and hooks repeat the same arguments. Owned
    /// by the set, so a reload starts with an empty cache.
    resolved: Mutex<HashMap<CacheKey, Resolved>>,
}

impl TemplateSet {
    /// The template called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&LoadedTemplate> {
        self.templates.get(name)
    }

    /// How many templates the set holds.
    pub fn len(&self) -> usize {
        self.templates.len()
    }

    /// Whether the set holds no template.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// The metrics of template `name` with `args` (later pairs win), resolved and validated;
    /// `None` for an unknown template.
    pub fn resolve(
        &self,
        name: &str,
        args: &[(String, String)],
    ) -> Option<Result<Resolved, SpecError>> {
        let loaded = self.templates.get(name)?;
        // Sorted by name (a stable sort), the last of equal names kept (later pairs win).
        let mut normalized: Vec<(&str, &str)> =
            args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        normalized.sort_by_key(|(k, _)| *k);
        let mut kept: Vec<(&str, &str)> = Vec::with_capacity(normalized.len());
        for (k, v) in normalized {
            match kept.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => kept.push((k, v)),
            }
        }
        if let Err(e) = crate::spec::check_declared(
            loaded.template.args.keys().map(String::as_str),
            kept.iter()
                .map(|(k, _)| *k)
                .filter(|k| !IMPLICIT_ARGS.contains(k)),
        ) {
            return Some(Err(e));
        }
        let mut key = CacheKey::with_capacity(64);
        for piece in std::iter::once(name).chain(kept.iter().flat_map(|(k, v)| [*k, *v])) {
            // Length-prefixed, so no two argument lists make the same key.
            key.push_str(&piece.len().to_string());
            key.push(':');
            key.push_str(piece);
        }
        let mut cache = match self.resolved.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(hit) = cache.get(&key) {
            return Some(Ok(hit.clone()));
        }
        // Resolved under the lock: concurrent misses for one key would only repeat the work.
        let owned: Vec<(String, String)> = kept
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let metrics = match loaded.template.metrics(&owned) {
            Ok(m) => Arc::new(m.into_iter().map(Arc::new).collect::<Vec<_>>()),
            Err(e) => return Some(Err(e)),
        };
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, metrics.clone());
        Some(Ok(metrics))
    }

    /// Template names in order (for "unknown template" messages).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.templates.keys().map(String::as_str)
    }
}

/// Why a directory could not be loaded: every broken file with its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The directory.
    pub dir: PathBuf,
    /// (file, what is wrong with it); the file is the directory itself for directory-wide
    /// problems.
    pub problems: Vec<(PathBuf, String)>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "templates in {} are invalid:", self.dir.display())?;
        for (file, why) in &self.problems {
            write!(f, "\n  {}: {why}", file.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// Reads every `*.yaml` / `*.yml` file directly in `dir` (hidden entries skipped, so the
/// `..data` links of a mounted ConfigMap are not read twice) and validates each template.
///
/// A template that cannot be read, or whose arguments all have values and whose metrics do not
/// validate, makes the load fail. Every file is also linted (`rollgate lint`'s rules: every
/// metric with its defaults, or typed stand-ins for arguments only a request supplies, and its
/// conditions); lint errors load the set but keep it from being ready.
pub fn load_dir(dir: &Path) -> Result<TemplateSet, LoadError> {
    let fail = |problems: Vec<(PathBuf, String)>| LoadError {
        dir: dir.to_path_buf(),
        problems,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| {
        fail(vec![(
            dir.to_path_buf(),
            format!("cannot read the directory: {e}"),
        )])
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_template_file(p))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(fail(vec![(
            dir.to_path_buf(),
            "no template files (*.yaml, *.yml) found".into(),
        )]));
    }

    let mut set = TemplateSet::default();
    let mut problems = Vec::new();
    for file in files {
        match load_file(&file) {
            Err(why) => problems.push((file, why)),
            Ok((templates, warnings, lint_errors)) => {
                set.warnings.extend(warnings);
                set.lint_errors.extend(lint_errors);
                for template in templates {
                    let name = template.name.clone();
                    if name.is_empty() {
                        problems.push((file.clone(), "a template has no metadata.name".into()));
                    } else if let Some(first) = set.templates.get(&name) {
                        problems.push((
                            file.clone(),
                            format!(
                                "template {name:?} is already defined in {}",
                                first.file.display()
                            ),
                        ));
                    } else {
                        set.templates.insert(
                            name,
                            LoadedTemplate {
                                template,
                                file: file.clone(),
                            },
                        );
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(fail(problems))
    }
}

/// Whether a directory entry is a template file a load reads.
pub(crate) fn is_template_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'));
    let yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e == "yaml" || e == "yml");
    // `is_file` follows symlinks, as ConfigMap mounts need.
    !hidden && yaml && path.is_file()
}

/// What one file holds: its templates, warnings about them, and its lint errors.
type FileLoad = (Vec<Template>, Vec<String>, Vec<String>);

/// Parses and lints one file.
fn load_file(file: &Path) -> Result<FileLoad, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let source = file.display().to_string();
    let templates = Template::parse_all(&text, &source).map_err(|e| {
        // The file is named once, by the caller.
        let text = e.to_string();
        text.strip_prefix(&format!("{source}: "))
            .map(str::to_string)
            .unwrap_or(text)
    })?;
    let mut warnings = Vec::new();
    for t in &templates {
        // Credentials whose destination an argument could choose: never served.
        let problems = crate::spec::template_problems(t);
        if !problems.is_empty() {
            return Err(format!("{} {:?}: {}", t.kind, t.name, problems.join("; ")));
        }
        let complete = t.args.values().all(Option::is_some);
        match t.metrics(&[]) {
            Ok(metrics) => {
                for m in metrics {
                    if let Provider::Unsupported(provider) = &m.provider {
                        warnings.push(format!(
                            "{source}: template {:?} metric {:?} uses provider {provider}, which rollgate cannot evaluate; hooks must select other metrics with `metric`",
                            t.name, m.name
                        ));
                    }
                }
            }
            Err(e) if complete => return Err(format!("{} {:?}: {e}", t.kind, t.name)),
            // Arguments only a request supplies: lint checks the metrics with stand-ins.
            Err(_) => {}
        }
    }
    let lint = lint_text(&text, &source);
    let mut lint_errors = Vec::new();
    for f in lint.findings {
        match f.severity {
            Severity::Error => lint_errors.push(f.to_string()),
            Severity::Warning => warnings.push(f.to_string()),
        }
    }
    Ok((templates, warnings, lint_errors))
}

/// The template set in use, shared by every request; replaced whole on reload.
#[derive(Debug)]
pub(crate) struct Store {
    dir: Option<PathBuf>,
    current: RwLock<Arc<TemplateSet>>,
}

impl Store {
    /// A store serving `set`, reloaded from `dir` (none: no templates, nothing to reload).
    pub(crate) fn new(dir: Option<PathBuf>, set: TemplateSet) -> Store {
        Store {
            dir,
            current: RwLock::new(Arc::new(set)),
        }
    }

    /// The set in use. Requests keep the `Arc` they took, so a reload never changes the
    /// templates under a request in flight.
    pub(crate) fn current(&self) -> Arc<TemplateSet> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The directory templates come from.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Re-reads the directory; on success the new set replaces the old one, on failure the
    /// old one stays. Returns the new set. Blocking file I/O: call from a blocking context.
    pub(crate) fn reload(&self) -> Result<Arc<TemplateSet>, LoadError> {
        let Some(dir) = &self.dir else {
            return Ok(self.current());
        };
        let set = Arc::new(load_dir(dir)?);
        // A set that fails lint does not replace one that passes: the last good set stays,
        // as for a set that does not load. One that fails lint replaces one that also does,
        // so that a partial fix is served and readiness follows the files.
        if !set.lint_errors.is_empty() && self.current().lint_errors.is_empty() {
            return Err(LoadError {
                dir: dir.clone(),
                problems: set
                    .lint_errors
                    .iter()
                    .map(|e| (dir.clone(), format!("fails lint: {e}")))
                    .collect(),
            });
        }
        match self.current.write() {
            Ok(mut guard) => *guard = set.clone(),
            Err(poisoned) => *poisoned.into_inner() = set.clone(),
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: error-rate}
spec:
  args: [{name: service}]
  metrics:
    - name: ratio
      successCondition: result[0] < 0.01
      provider:
        plugin:
          rollgate/analysis:
            query: sum(rate(x{service="{{args.service}}"}[5m]))
            noData: inconclusive
"#;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn loads_templates_and_skips_hidden_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", GOOD);
        write(dir.path(), ".hidden.yaml", "not: [valid");
        write(dir.path(), "README.md", "text");
        let set = load_dir(dir.path()).unwrap();
        assert_eq!(set.names().collect::<Vec<_>>(), vec!["error-rate"]);
        assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    }

    #[test]
    fn names_every_broken_file_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", GOOD);
        write(
            dir.path(),
            "b.yaml",
            &GOOD
                .replace("noData: inconclusive", "noData: maybe")
                .replace("error-rate", "other"),
        );
        write(dir.path(), "c.yml", "kind: ConfigMap\n");
        write(dir.path(), "d.yaml", GOOD);
        let err = load_dir(dir.path()).unwrap_err();
        let text = err.to_string();
        let files: Vec<String> = err
            .problems
            .iter()
            .map(|(f, _)| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, vec!["c.yml", "d.yaml"], "{text}");
        assert!(text.contains("c.yml: no AnalysisTemplate"), "{text}");
        assert!(text.contains("already defined"), "{text}");
        // b.yaml has an argument without value: its bad noData is a lint error, whether or
        // not the argument has a value.
        for args in ["[{name: service}]", "[{name: service, value: web}]"] {
            let dir2 = tempfile::tempdir().unwrap();
            write(
                dir2.path(),
                "b.yaml",
                &GOOD
                    .replace("noData: inconclusive", "noData: maybe")
                    .replace("[{name: service}]", args),
            );
            let text = match load_dir(dir2.path()) {
                Ok(set) => set.lint_errors.join("\n"),
                Err(e) => e.to_string(),
            };
            assert!(text.contains("b.yaml") && text.contains("noData"), "{text}");
        }
    }

    #[test]
    fn request_only_arguments_are_checked_with_typed_stand_ins() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "w.yaml",
            &GOOD
                .replace("[5m]", "[{{args.window}}]")
                .replace("[{name: service}]", "[{name: service}, {name: window}]"),
        );
        let set = load_dir(dir.path()).unwrap();
        assert_eq!(set.len(), 1);
        assert!(set.warnings.is_empty(), "{:?}", set.warnings);
        assert!(set.lint_errors.is_empty(), "{:?}", set.lint_errors);
    }

    #[test]
    fn a_broken_condition_or_no_data_loads_but_fails_lint() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.yaml",
            &GOOD.replace("result[0] < 0.01", "result[0] < 0.01 &&"),
        );
        write(
            dir.path(),
            "b.yaml",
            &GOOD
                .replace("noData: inconclusive", "noData: maybe")
                .replace("error-rate", "other"),
        );
        let set = load_dir(dir.path()).unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.lint_errors.len(), 2, "{:?}", set.lint_errors);
        assert!(
            set.lint_errors[0].contains("successCondition"),
            "{:?}",
            set.lint_errors
        );
        assert!(
            set.lint_errors[1].contains("noData"),
            "{:?}",
            set.lint_errors
        );
    }

    #[test]
    fn a_reload_that_fails_lint_keeps_the_good_set() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", GOOD);
        let store = Store::new(
            Some(dir.path().to_path_buf()),
            load_dir(dir.path()).unwrap(),
        );
        let before = store.current();
        write(
            dir.path(),
            "a.yaml",
            &GOOD.replace("noData: inconclusive", "noData: maybe"),
        );
        let err = store.reload().unwrap_err().to_string();
        assert!(
            err.contains("fails lint") && err.contains("noData"),
            "{err}"
        );
        assert!(Arc::ptr_eq(&before, &store.current()));
    }

    #[test]
    fn a_failed_reload_keeps_the_old_set() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", GOOD);
        let store = Store::new(
            Some(dir.path().to_path_buf()),
            load_dir(dir.path()).unwrap(),
        );
        let before = store.current();
        write(dir.path(), "a.yaml", "kind: [");
        assert!(store.reload().is_err());
        assert!(Arc::ptr_eq(&before, &store.current()));
        write(dir.path(), "a.yaml", &GOOD.replace("error-rate", "renamed"));
        let after = store.reload().unwrap();
        assert!(after.get("renamed").is_some() && after.get("error-rate").is_none());
        assert!(before.get("error-rate").is_some());
    }

    #[test]
    fn resolved_metrics_are_cached_per_arguments() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", GOOD);
        let set = load_dir(dir.path()).unwrap();
        let args = |v: &str| vec![("service".to_string(), v.to_string())];
        let a = set.resolve("error-rate", &args("a")).unwrap().unwrap();
        let again = set.resolve("error-rate", &args("a")).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        let b = set.resolve("error-rate", &args("b")).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        // Later pairs win, as for template arguments everywhere.
        let mut twice = args("a");
        twice.extend(args("b"));
        assert!(Arc::ptr_eq(
            &b,
            &set.resolve("error-rate", &twice).unwrap().unwrap()
        ));
        assert!(set.resolve("error-rate", &[]).unwrap().is_err());
        assert!(set.resolve("nope", &[]).is_none());
    }

    #[test]
    fn an_empty_or_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_dir(dir.path()).is_err());
        assert!(load_dir(&dir.path().join("nope")).is_err());
    }
}
