//! `--reload-interval`: notices that the files a reload reads have changed and asks for the same
//! reload as SIGHUP. Kubernetes updates mounted ConfigMaps and Secrets in place (a symlink swap)
//! and sends no signal, so without this a new template needs a restart.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::templates::is_template_file;

/// The shortest reload interval accepted: checking more often only burns CPU.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The files a reload reads: the template files of a directory, and single files (the token
/// file, the TLS certificate and key).
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    /// The templates directory.
    pub dir: Option<PathBuf>,
    /// Other files.
    pub files: Vec<PathBuf>,
}

/// What the watched files looked like at one moment. Two fingerprints differ when a file was
/// added, removed, replaced (a new inode, as a ConfigMap update gives) or rewritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint(Vec<(PathBuf, Option<Stat>)>);

/// Length, modification time and inode of a file, following symlinks.
type Stat = (u64, SystemTime, u64);

impl Watched {
    /// Reads the current fingerprint. Blocking file I/O; unreadable files and directories
    /// count as absent, so that their coming back is a change too.
    pub(crate) fn fingerprint(&self) -> Fingerprint {
        let mut entries: Vec<(PathBuf, Option<Stat>)> = Vec::new();
        if let Some(dir) = &self.dir {
            if let Ok(read) = fs::read_dir(dir) {
                entries.extend(
                    read.filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| is_template_file(p))
                        .map(|p| {
                            let stat = stat(&p);
                            (p, stat)
                        }),
                );
            }
        }
        entries.extend(self.files.iter().map(|f| (f.clone(), stat(f))));
        entries.sort();
        Fingerprint(entries)
    }
}

fn stat(path: &Path) -> Option<Stat> {
    let meta = fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?, meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_to_watched_files_change_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        fs::write(&token, "one").unwrap();
        let templates = dir.path().join("templates");
        fs::create_dir(&templates).unwrap();
        fs::write(templates.join("a.yaml"), "a").unwrap();
        let watched = Watched {
            dir: Some(templates.clone()),
            files: vec![token.clone()],
        };
        let mut last = watched.fingerprint();
        assert_eq!(last, watched.fingerprint(), "nothing changed");

        let mut changed = |what: &str, change: &dyn Fn()| {
            change();
            let now = watched.fingerprint();
            assert_ne!(now, last, "{what}");
            last = now;
        };
        changed("a template added", &|| {
            fs::write(templates.join("b.yml"), "b").unwrap()
        });
        changed("a template rewritten", &|| {
            fs::write(templates.join("a.yaml"), "a, longer").unwrap()
        });
        changed("a template replaced by a new file", &|| {
            fs::write(templates.join("new"), "a, longer").unwrap();
            fs::rename(templates.join("new"), templates.join("a.yaml")).unwrap();
        });
        changed("a template removed", &|| {
            fs::remove_file(templates.join("b.yml")).unwrap()
        });
        changed("the token rotated", &|| fs::write(&token, "two!").unwrap());
        changed("the token removed", &|| fs::remove_file(&token).unwrap());

        // Files a reload does not read are not watched.
        fs::write(templates.join("notes.txt"), "x").unwrap();
        fs::write(templates.join(".hidden.yaml"), "x").unwrap();
        assert_eq!(watched.fingerprint(), last);
    }
}
