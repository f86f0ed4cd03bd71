//! The plugin's unix socket: a private directory per process, the stale directories of killed
//! plugin processes removed, and everything cleaned up on drop.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::UnixListener;

use super::HostError as PluginError;

/// The plugin's listening socket, in a private directory; both are removed on drop.
#[derive(Debug)]
pub(crate) struct PluginSocket {
    dir: PathBuf,
    path: PathBuf,
}

impl PluginSocket {
    /// Creates `<base>/rollgate-<unique>/plugin.sock`, mode 0600 (0660 and the given group
    /// when `group`, a name or a gid, is set), and listens on it.
    pub(crate) fn bind(
        base: &Path,
        group: Option<&str>,
    ) -> Result<(PluginSocket, UnixListener), PluginError> {
        let gid = group.map(resolve_group).transpose()?;
        let sock_err = |source| PluginError::Socket {
            dir: base.to_path_buf(),
            source,
        };
        for stale in remove_stale_dirs(base) {
            tracing::info!(dir = %stale.display(), "plugin: removed the socket directory of a plugin process that is gone");
        }
        let dir = private_dir(base).map_err(sock_err)?;
        let socket = PluginSocket {
            path: dir.join(SOCKET_NAME),
            dir,
        };
        write_marker(&socket.dir).map_err(sock_err)?;
        let (dir_mode, sock_mode) = if gid.is_some() {
            (0o710, 0o660)
        } else {
            (0o700, 0o600)
        };
        let listener = UnixListener::bind(&socket.path).map_err(sock_err)?;
        std::fs::set_permissions(&socket.path, std::fs::Permissions::from_mode(sock_mode))
            .and_then(|()| {
                std::fs::set_permissions(&socket.dir, std::fs::Permissions::from_mode(dir_mode))
            })
            .map_err(sock_err)?;
        if let Some(gid) = gid {
            std::os::unix::fs::chown(&socket.dir, None, Some(gid))
                .and_then(|()| std::os::unix::fs::chown(&socket.path, None, Some(gid)))
                .map_err(sock_err)?;
        }
        Ok((socket, listener))
    }

    /// Where the host dials.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PluginSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.dir.join(MARKER_NAME));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The socket's name in its directory.
const SOCKET_NAME: &str = "plugin.sock";
/// The file that marks a directory as made by a rollgate plugin process.
const MARKER_NAME: &str = "rollgate-plugin";
/// The marker's first line.
const MARKER_TAG: &str = "rollgate plugin socket directory";

/// The pid namespace of this process (`/proc/self/ns/pid`): a pid means this process's
/// neighbours only within it.
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.display().to_string())
}

/// The marker's contents for this process.
fn marker_text(pid: u32, ns: &str) -> String {
    format!("{MARKER_TAG}\npid {pid}\npidns {ns}\n")
}

/// Writes the marker into a freshly made private directory.
fn write_marker(dir: &Path) -> io::Result<()> {
    let ns = pid_namespace().unwrap_or_default();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join(MARKER_NAME))?;
    f.write_all(marker_text(std::process::id(), &ns).as_bytes())
}

/// Removes the socket directories under `base` that rollgate plugin processes left when they
/// were killed (SIGKILL leaves no chance to clean up), and returns them. A directory is removed
/// only when all of these hold, so nothing else is ever touched: its name is
/// `rollgate-<pid>-<8 hex digits>`; it is a real directory (never a symlink), owned by this
/// user, mode 0700 or 0710; its marker is a regular file owned by this user naming the same
/// pid and this process's pid namespace; that pid is not a live process; and it holds only
/// the marker and the socket (a unix socket). Files are unlinked one by one and the directory
/// removed only if then empty.
pub(crate) fn remove_stale_dirs(base: &Path) -> Vec<PathBuf> {
    let (Some(ns), Ok(me)) = (pid_namespace(), std::fs::metadata("/proc/self")) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_name_pid) else {
            continue;
        };
        let dir = entry.path();
        if pid != std::process::id()
            && is_stale(&dir, pid, me.uid(), &ns)
            && remove_stale(&dir).is_ok()
        {
            removed.push(dir);
        }
    }
    removed
}

/// The pid in a directory name of the form `rollgate-<pid>-<8 hex digits>`.
fn stale_name_pid(name: &str) -> Option<u32> {
    let (pid, suffix) = name.strip_prefix("rollgate-")?.split_once('-')?;
    let hex = suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit());
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    if hex && digits {
        pid.parse().ok()
    } else {
        None
    }
}

fn is_stale(dir: &Path, pid: u32, uid: u32, ns: &str) -> bool {
    let owned = |m: &std::fs::Metadata| m.uid() == uid;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.file_type().is_dir() || !owned(&meta) || !matches!(meta.mode() & 0o777, 0o700 | 0o710)
    {
        return false;
    }
    let marker = dir.join(MARKER_NAME);
    match std::fs::symlink_metadata(&marker) {
        Ok(m) if m.file_type().is_file() && owned(&m) && m.len() < 4096 => {}
        _ => return false,
    }
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(marker_text(pid, ns).as_str()) {
        return false;
    }
    // /proc/<pid> exists for any live process (or thread group) of this pid namespace.
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn remove_stale(dir: &Path) -> io::Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        let expected =
            (name == MARKER_NAME && kind.is_file()) || (name == SOCKET_NAME && kind.is_socket());
        if !expected {
            return Err(io::Error::other(
                "unexpected entry in a stale socket directory",
            ));
        }
        files.push(entry.path());
    }
    for f in files {
        std::fs::remove_file(f)?;
    }
    std::fs::remove_dir(dir)
}

/// A new directory under `base` only this user can enter, so the socket is never reachable by
/// others, not even between bind and chmod.
fn private_dir(base: &Path) -> io::Result<PathBuf> {
    let mut last = io::Error::other("no attempt made");
    for attempt in 0..16u32 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = base.join(format!(
            "rollgate-{}-{:08x}",
            std::process::id(),
            nanos.wrapping_add(attempt.wrapping_mul(0x9E37_79B9))
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// A group name (looked up in /etc/group) or a numeric gid.
fn resolve_group(group: &str) -> Result<u32, PluginError> {
    if let Ok(gid) = group.parse() {
        return Ok(gid);
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    groups
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            Some((name, gid))
        })
        .find(|(name, _)| *name == group)
        .map(|(_, gid)| gid)
        .ok_or_else(|| PluginError::UnknownGroup(group.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn groups_resolve_by_name_or_gid() {
        assert_eq!(resolve_group("0").unwrap(), 0);
        assert_eq!(resolve_group("root").unwrap(), 0);
        assert!(resolve_group("no-such-group-here").is_err());
    }

    #[tokio::test]
    async fn socket_is_private_and_removed() {
        let base = tempfile::tempdir().unwrap();
        let (sock, _l) = PluginSocket::bind(base.path(), None).unwrap();
        let path = sock.path().to_path_buf();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let dir_meta = std::fs::metadata(path.parent().unwrap()).unwrap();
        assert_eq!(dir_meta.mode() & 0o777, 0o700);
        drop(sock);
        assert!(!path.exists());
        assert!(!path.parent().unwrap().exists());
    }

    /// A pid that was just in use and is now free (a child that has exited).
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// A directory as a killed plugin `pid` leaves it: marker and socket inside.
    fn leftover(base: &Path, pid: u32, suffix: &str) -> PathBuf {
        let dir = base.join(format!("rollgate-{pid}-{suffix}"));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        let ns = pid_namespace().unwrap();
        std::fs::write(dir.join(MARKER_NAME), marker_text(pid, &ns)).unwrap();
        drop(std::os::unix::net::UnixListener::bind(dir.join(SOCKET_NAME)).unwrap());
        dir
    }

    #[tokio::test]
    async fn stale_directories_of_dead_plugins_are_removed_and_nothing_else() {
        let base = tempfile::tempdir().unwrap();
        let b = base.path();
        let dead = dead_pid();
        let stale = leftover(b, dead, "0000abcd");
        // Kept: a live pid (pid 1), a wrong marker, no marker, an extra file, another owner,
        // a symlink to a stale-looking directory, a name rollgate does not make, a wider mode.
        let live = leftover(b, 1, "0000abce");
        let wrong_marker = leftover(b, dead, "0000abcf");
        std::fs::write(wrong_marker.join(MARKER_NAME), marker_text(dead, "pid:[1]")).unwrap();
        let no_marker = leftover(b, dead, "0000abd0");
        std::fs::remove_file(no_marker.join(MARKER_NAME)).unwrap();
        let extra = leftover(b, dead, "0000abd1");
        std::fs::write(extra.join("notes.txt"), "mine").unwrap();
        let other_user = leftover(b, dead, "0000abd2");
        std::os::unix::fs::chown(&other_user, Some(54321), None).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = leftover(elsewhere.path(), dead, "0000abd3");
        let link = b.join(format!("rollgate-{dead}-0000abd4"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let odd_name = b.join(format!("rollgate-{dead}-xyz"));
        std::fs::create_dir(&odd_name).unwrap();
        let wide = leftover(b, dead, "0000abd5");
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();

        let (sock, _l) = PluginSocket::bind(b, None).unwrap();
        assert!(
            !stale.exists(),
            "the dead plugin's directory is still there"
        );
        for kept in [
            &live,
            &wrong_marker,
            &no_marker,
            &extra,
            &other_user,
            &odd_name,
            &wide,
        ] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(link.symlink_metadata().is_ok() && target.join(SOCKET_NAME).exists());
        // The new directory carries its own marker, and drop removes it all.
        let own = sock.path().parent().unwrap().to_path_buf();
        let marker = std::fs::read_to_string(own.join(MARKER_NAME)).unwrap();
        assert!(
            marker.contains(&format!("pid {}", std::process::id())),
            "{marker}"
        );
        drop(sock);
        assert!(!own.exists());
    }

    #[test]
    fn stale_names_are_recognised_exactly() {
        assert_eq!(stale_name_pid("rollgate-42-0123abcd"), Some(42));
        for bad in [
            "rollgate-42-0123abc",
            "rollgate--0123abcd",
            "rollgate-4x-0123abcd",
            "other-42-0123abcd",
            "rollgate-42-0123abcg",
        ] {
            assert_eq!(stale_name_pid(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn group_socket_is_group_rw() {
        let base = tempfile::tempdir().unwrap();
        let gid = std::fs::metadata(base.path()).unwrap().gid();
        let (sock, _l) = PluginSocket::bind(base.path(), Some(&gid.to_string())).unwrap();
        let meta = std::fs::metadata(sock.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o660);
        assert_eq!(meta.gid(), gid);
    }
}
