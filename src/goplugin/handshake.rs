//! go-plugin's process handshake: the magic cookie, protocol version negotiation, the unix
//! socket the host dials, and the one line announced on stdout.

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::net::UnixListener;

use super::PluginError;

/// The magic cookie Argo Rollouts sets for metric-provider plugins.
pub const COOKIE_KEY: &str = "ARGO_ROLLOUTS_RPC_PLUGIN";
/// Its value.
pub const COOKIE_VALUE: &str = "metricprovider";
/// go-plugin's core protocol version.
const CORE_PROTOCOL_VERSION: u32 = 1;
/// The application protocol version Argo Rollouts uses.
pub const APP_PROTOCOL_VERSION: u32 = 1;

/// Checks that the process was started by a plugin host (the magic cookie is set).
pub fn check_cookie() -> Result<(), PluginError> {
    match std::env::var(COOKIE_KEY) {
        Ok(v) if v == COOKIE_VALUE => Ok(()),
        _ => Err(PluginError::NotLaunchedByHost),
    }
}

/// Picks the protocol version from the host's `PLUGIN_PROTOCOL_VERSIONS` (a comma list):
/// version 1 must be among them. Entries that are not numbers are ignored, as go-plugin does;
/// no list at all means the host predates negotiation and speaks version 1.
pub fn negotiate_version(offered: Option<&str>) -> Result<u32, PluginError> {
    let Some(list) = offered.filter(|s| !s.trim().is_empty()) else {
        return Ok(APP_PROTOCOL_VERSION);
    };
    let versions: Vec<u32> = list
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if versions.is_empty() || versions.contains(&APP_PROTOCOL_VERSION) {
        Ok(APP_PROTOCOL_VERSION)
    } else {
        Err(PluginError::UnsupportedProtocol {
            offered: list.to_string(),
        })
    }
}

/// The handshake line go-plugin hosts parse: core version, app version, network, address,
/// protocol, and an empty server-certificate field.
pub fn handshake_line(version: u32, socket: &Path) -> String {
    format!(
        "{CORE_PROTOCOL_VERSION}|{version}|unix|{}|netrpc|\n",
        socket.display()
    )
}

/// Writes the handshake line to stdout and flushes it. Nothing else is ever written there.
pub(crate) fn announce(version: u32, socket: &Path) -> Result<(), PluginError> {
    let mut out = io::stdout().lock();
    out.write_all(handshake_line(version, socket).as_bytes())
        .and_then(|()| out.flush())
        .map_err(PluginError::Handshake)
}

/// The plugin's listening socket, in a private directory; both are removed on drop.
#[derive(Debug)]
pub struct PluginSocket {
    dir: PathBuf,
    path: PathBuf,
}

impl PluginSocket {
    /// Creates `<base>/rollgate-<unique>/plugin.sock`, mode 0600 (0660 and the given group
    /// when `group`, a name or a gid, is set), and listens on it.
    pub fn bind(
        base: &Path,
        group: Option<&str>,
    ) -> Result<(PluginSocket, UnixListener), PluginError> {
        let gid = group.map(resolve_group).transpose()?;
        let sock_err = |source| PluginError::Socket {
            dir: base.to_path_buf(),
            source,
        };
        let dir = private_dir(base).map_err(sock_err)?;
        let socket = PluginSocket {
            path: dir.join("plugin.sock"),
            dir,
        };
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
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PluginSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
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
    fn versions_must_include_one() {
        assert_eq!(negotiate_version(None).unwrap(), 1);
        assert_eq!(negotiate_version(Some("")).unwrap(), 1);
        assert_eq!(negotiate_version(Some("1")).unwrap(), 1);
        assert_eq!(negotiate_version(Some("2, 1")).unwrap(), 1);
        assert_eq!(negotiate_version(Some("x")).unwrap(), 1);
        let e = negotiate_version(Some("2,3")).unwrap_err();
        assert!(e.to_string().contains("2,3"), "{e}");
    }

    #[test]
    fn handshake_line_has_six_fields() {
        let l = handshake_line(1, Path::new("/tmp/x/plugin.sock"));
        assert_eq!(l, "1|1|unix|/tmp/x/plugin.sock|netrpc|\n");
    }

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
