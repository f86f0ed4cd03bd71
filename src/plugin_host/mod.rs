//! go-plugin's process start-up, plugin side, for both protocols rollgate speaks (net/rpc in
//! `crate::goplugin`, gRPC in `crate::grpc`): the magic cookie, the environment the host sets
//! ([`HostEnv`]), protocol version negotiation, the private unix socket ([`PluginSocket`]) and
//! the one handshake line announced on stdout ([`announce`]). One implementation, so both
//! protocols read the same environment the same way and print the same line for it.

mod socket;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub(crate) use socket::PluginSocket;

/// The magic cookie Argo Rollouts sets for metric-provider plugins.
pub(crate) const COOKIE_KEY: &str = "ARGO_ROLLOUTS_RPC_PLUGIN";
/// Its value.
pub(crate) const COOKIE_VALUE: &str = "metricprovider";
/// go-plugin's core protocol version.
const CORE_PROTOCOL_VERSION: u32 = 1;
/// The application protocol version Argo Rollouts uses.
pub(crate) const APP_PROTOCOL_VERSION: u32 = 1;

/// Why a plugin process could not start or serve (either protocol).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Started without the magic cookie: by a person, not by the controller.
    #[error(
        "This binary is a plugin. These are not meant to be executed directly.\n\
         Please execute the program that consumes these plugins (the Argo Rollouts controller),\n\
         which will load any plugins automatically"
    )]
    NotLaunchedByHost,
    /// `PLUGIN_PROTOCOL_VERSIONS` lacks version 1.
    #[error(
        "the plugin host offers protocol versions {offered:?}, but rollgate speaks only version 1"
    )]
    UnsupportedProtocol {
        /// `PLUGIN_PROTOCOL_VERSIONS` as given.
        offered: String,
    },
    /// The socket (or its directory) could not be created.
    #[error("cannot create the plugin socket in {dir}: {source}")]
    Socket {
        /// The directory.
        dir: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// `PLUGIN_UNIX_SOCKET_GROUP` names no group.
    #[error("unknown socket group {0:?}")]
    UnknownGroup(String),
    /// stdout is gone.
    #[error("cannot write the plugin handshake to stdout: {0}")]
    Handshake(io::Error),
    /// SIGTERM/SIGINT handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signal(io::Error),
}

/// Checks that the process was started by a plugin host (the magic cookie is set).
pub(crate) fn check_cookie() -> Result<(), HostError> {
    match std::env::var(COOKIE_KEY) {
        Ok(v) if v == COOKIE_VALUE => Ok(()),
        _ => Err(HostError::NotLaunchedByHost),
    }
}

/// What a go-plugin host passes its plugin in the environment. A variable that is unset, empty
/// or only whitespace counts as not given (the two plugin modes used to disagree on whitespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostEnv {
    /// Where the socket's directory goes (`PLUGIN_UNIX_SOCKET_DIR`, else the temp dir).
    pub socket_dir: PathBuf,
    /// Group given read/write access to the socket (`PLUGIN_UNIX_SOCKET_GROUP`, name or gid).
    pub socket_group: Option<String>,
    /// The host's acceptable protocol versions (`PLUGIN_PROTOCOL_VERSIONS`).
    pub protocol_versions: Option<String>,
    /// The host's certificate, PEM (`PLUGIN_CLIENT_CERT`): set means AutoMTLS (gRPC only).
    pub client_cert: Option<String>,
}

impl HostEnv {
    /// The process environment.
    pub(crate) fn from_env() -> HostEnv {
        HostEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// The environment as `var` answers it (for tests: no process state).
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> HostEnv {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        HostEnv {
            socket_dir: var("PLUGIN_UNIX_SOCKET_DIR")
                .map_or_else(std::env::temp_dir, PathBuf::from),
            socket_group: var("PLUGIN_UNIX_SOCKET_GROUP"),
            protocol_versions: var("PLUGIN_PROTOCOL_VERSIONS"),
            client_cert: var("PLUGIN_CLIENT_CERT"),
        }
    }

    /// The protocol version to speak (see [`negotiate_version`]).
    pub(crate) fn version(&self) -> Result<u32, HostError> {
        negotiate_version(self.protocol_versions.as_deref())
    }

    /// Creates the plugin's socket where the host asked (see [`PluginSocket::bind`]).
    pub(crate) fn bind(&self) -> Result<(PluginSocket, tokio::net::UnixListener), HostError> {
        PluginSocket::bind(&self.socket_dir, self.socket_group.as_deref())
    }
}

/// Picks the protocol version from the host's `PLUGIN_PROTOCOL_VERSIONS` (a comma list):
/// version 1 must be among them. Entries that are not numbers are ignored, as go-plugin does;
/// no list at all means the host predates negotiation and speaks version 1.
pub(crate) fn negotiate_version(offered: Option<&str>) -> Result<u32, HostError> {
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
        Err(HostError::UnsupportedProtocol {
            offered: list.to_string(),
        })
    }
}

/// The go-plugin protocol a plugin serves, as named in the handshake line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireProtocol {
    /// Go's net/rpc over yamux.
    NetRpc,
    /// gRPC over HTTP/2.
    Grpc,
}

impl WireProtocol {
    fn name(self) -> &'static str {
        match self {
            WireProtocol::NetRpc => "netrpc",
            WireProtocol::Grpc => "grpc",
        }
    }
}

/// The handshake line go-plugin hosts parse: core version, app version, network, address,
/// protocol, and the plugin's server certificate (base64 DER; empty without AutoMTLS).
pub(crate) fn handshake_line(
    protocol: WireProtocol,
    version: u32,
    socket: &Path,
    certificate: &str,
) -> String {
    format!(
        "{CORE_PROTOCOL_VERSION}|{version}|unix|{}|{}|{certificate}\n",
        socket.display(),
        protocol.name()
    )
}

/// Writes `line` (a [`handshake_line`]) to stdout and flushes it. Nothing else is ever written
/// there.
pub(crate) fn announce(line: &str) -> Result<(), HostError> {
    let mut out = io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .map_err(HostError::Handshake)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

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
    fn handshake_lines_have_six_fields_and_differ_only_in_protocol() {
        let p = Path::new("/tmp/x/plugin.sock");
        assert_eq!(
            handshake_line(WireProtocol::NetRpc, 1, p, ""),
            "1|1|unix|/tmp/x/plugin.sock|netrpc|\n"
        );
        assert_eq!(
            handshake_line(WireProtocol::Grpc, 1, p, ""),
            "1|1|unix|/tmp/x/plugin.sock|grpc|\n"
        );
        assert_eq!(
            handshake_line(WireProtocol::Grpc, 1, p, "MIIB"),
            "1|1|unix|/tmp/x/plugin.sock|grpc|MIIB\n"
        );
    }

    #[test]
    fn blank_variables_are_not_given() {
        let vars = HashMap::from([
            ("PLUGIN_UNIX_SOCKET_DIR", " "),
            ("PLUGIN_UNIX_SOCKET_GROUP", "\t"),
            ("PLUGIN_PROTOCOL_VERSIONS", ""),
            ("PLUGIN_CLIENT_CERT", " \n"),
        ]);
        let env = HostEnv::from_vars(|k| vars.get(k).map(|v| (*v).to_string()));
        assert_eq!(env.socket_dir, std::env::temp_dir());
        assert_eq!(env.socket_group, None);
        assert_eq!(env.protocol_versions, None);
        assert_eq!(env.client_cert, None);
        let set = HashMap::from([
            ("PLUGIN_UNIX_SOCKET_DIR", "/run/plugins"),
            ("PLUGIN_UNIX_SOCKET_GROUP", "argo"),
            ("PLUGIN_PROTOCOL_VERSIONS", "1,2"),
        ]);
        let env = HostEnv::from_vars(|k| set.get(k).map(|v| (*v).to_string()));
        assert_eq!(env.socket_dir, PathBuf::from("/run/plugins"));
        assert_eq!(env.socket_group.as_deref(), Some("argo"));
        assert_eq!(env.version().unwrap(), 1);
    }
}
