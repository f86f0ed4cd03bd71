//! Proxies named by the environment (read by reqwest through hyper-util's matcher, as curl and
//! Go read them): rollgate builds its client without proxies only when no proxy variable is
//! set (`proxy_in_environment` in src/prometheus/client.rs), so a proxy that is named must
//! still carry every query — plain HTTP in absolute form, HTTPS through a CONNECT tunnel, with
//! the proxy's credentials — and `NO_PROXY` must still exempt its hosts; a SOCKS proxy (reqwest
//! is built without it) is refused by name. Through the binary, since the variables are read
//! when the process builds its client.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use crate::support::stub::{self, Stub};

/// Every variable hyper-util 0.1.21's matcher reads on Linux (`client/proxy/matcher.rs`,
/// `Builder::from_env`).
const PROXY_VARIABLES: [&str; 9] = [
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
];

/// A template whose one metric asks Prometheus at `address` directly (Argo's own provider;
/// `insecure` accepts the test server's certificate).
fn template(dir: &Path, address: &str) -> std::path::PathBuf {
    let file = dir.join("t.yaml");
    let yaml = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {{name: t}}
spec:
  metrics:
    - name: errors
      successCondition: result[0] < 0.01
      provider:
        prometheus:
          address: {address}
          insecure: true
          query: sum(rate(errors[5m]))
"#
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

/// `rollgate dry-run` of `file` with only `env` of the proxy variables set.
fn dry_run(file: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(crate::support::rollgate_bin());
    cmd.args(["dry-run", "-o", "json", "-f"]).arg(file);
    for name in PROXY_VARIABLES {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

fn answered_successful(out: &Output) -> bool {
    let stdout = String::from_utf8_lossy(&out.stdout);
    out.status.success() && stdout.contains("\"Successful\"")
}

#[test]
fn queries_go_through_the_proxy_the_environment_names_and_no_proxy_exempts() {
    let healthy = |_: &stub::Request, _: usize| stub::json(200, &stub::vector_body("0.001"));
    let prometheus = Stub::script(healthy);
    let proxy = Stub::script(healthy);
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &prometheus.url);
    let query_url = format!("{}/api/v1/query", prometheus.url);

    // No variable: straight to Prometheus.
    let out = dry_run(&file, &[]);
    assert!(answered_successful(&out), "{out:?}");
    assert_eq!((prometheus.requests(), proxy.requests()), (1, 0));

    // Each name, either case: through the proxy, asked in absolute form.
    for name in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        let before = proxy.requests();
        let out = dry_run(&file, &[(name, &proxy.url)]);
        assert!(answered_successful(&out), "{name}: {out:?}");
        assert_eq!(proxy.requests(), before + 1, "{name}");
        assert_eq!(proxy.last_request().unwrap().target, query_url, "{name}");
    }
    assert_eq!(prometheus.requests(), 1, "nothing went around the proxy");

    // A proxy for https only does not take an http query; NO_PROXY exempts its host.
    let before = proxy.requests();
    for env in [
        &[("HTTPS_PROXY", proxy.url.as_str())][..],
        &[
            ("HTTP_PROXY", proxy.url.as_str()),
            ("NO_PROXY", "127.0.0.1"),
        ][..],
    ] {
        let out = dry_run(&file, env);
        assert!(answered_successful(&out), "{env:?}: {out:?}");
    }
    assert_eq!((prometheus.requests(), proxy.requests()), (3, before));
}

#[test]
fn proxy_credentials_go_to_the_proxy_only() {
    let healthy = |_: &stub::Request, _: usize| stub::json(200, &stub::vector_body("0.001"));
    let prometheus = Stub::script(healthy);
    let proxy = Stub::script(healthy);
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &prometheus.url);
    let with_user = proxy.url.replace("http://", "http://al%40ice:s3cret@");
    let out = dry_run(&file, &[("HTTP_PROXY", &with_user)]);
    assert!(answered_successful(&out), "{out:?}");
    let seen = proxy.last_request().unwrap();
    let want = format!("Basic {}", stub::base64(b"al@ice:s3cret"));
    assert_eq!(seen.header("proxy-authorization"), Some(want.as_str()));
    assert_eq!(seen.header("authorization"), None);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret"));
}

#[test]
fn a_socks_proxy_is_refused_by_name() {
    let prometheus = Stub::script(|_, _| stub::json(200, &stub::vector_body("0.001")));
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &prometheus.url);
    let out = dry_run(&file, &[("ALL_PROXY", "socks5://u:secret@127.0.0.1:1")]);
    assert!(!answered_successful(&out), "{out:?}");
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        shown.contains("proxy scheme `socks5` is not supported"),
        "{shown}"
    );
    assert!(!shown.contains("secret"), "{shown}");
    assert_eq!(prometheus.requests(), 0, "nothing went around the proxy");
}

/// A tunnel's target and the `Proxy-Authorization` it was asked with.
type Tunnelled = (String, Option<String>);

/// A CONNECT proxy: records each tunnel's target and `Proxy-Authorization`, then relays bytes.
struct ConnectProxy {
    url: String,
    tunnels: Arc<Mutex<Vec<Tunnelled>>>,
}

impl ConnectProxy {
    fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let seen = tunnels.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().take(16) {
                let Ok(client) = client else { return };
                let seen = seen.clone();
                std::thread::spawn(move || tunnel(client, &seen));
            }
        });
        ConnectProxy { url, tunnels }
    }
}

fn tunnel(client: TcpStream, seen: &Mutex<Vec<Tunnelled>>) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut parts = line.split_whitespace();
    assert_eq!(parts.next(), Some("CONNECT"), "{line}");
    let target = parts.next().unwrap().to_string();
    let mut auth = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("proxy-authorization") {
                auth = Some(value.trim().to_string());
            }
        }
    }
    seen.lock().unwrap().push((target.clone(), auth));
    let upstream = TcpStream::connect(&target).unwrap();
    let mut client_w = client.try_clone().unwrap();
    client_w
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .unwrap();
    let mut upstream_r = upstream.try_clone().unwrap();
    let mut upstream_w = upstream;
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut upstream_r, &mut client_w);
    });
    let _ = std::io::copy(&mut reader, &mut upstream_w);
}

#[test]
fn https_queries_go_through_a_connect_tunnel() {
    let pki = super::tls::pki();
    let healthy = |_: &stub::Request, _: usize| stub::json(200, &stub::vector_body("0.001"));
    let prometheus = Stub::script_tls(pki.config.clone(), healthy);
    let proxy = ConnectProxy::start();
    let dir = tempfile::tempdir().unwrap();
    let file = template(dir.path(), &format!("https://{}", prometheus.addr));
    let authority = prometheus.addr.to_string();

    let with_user = proxy.url.replace("http://", "http://u:pw@");
    for name in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"] {
        let out = dry_run(&file, &[(name, &with_user)]);
        assert!(answered_successful(&out), "{name}: {out:?}");
        let last = proxy.tunnels.lock().unwrap().last().cloned();
        let want = format!("Basic {}", stub::base64(b"u:pw"));
        assert_eq!(last, Some((authority.clone(), Some(want))), "{name}");
    }
    assert_eq!(prometheus.requests(), 3);

    // HTTP_PROXY is not for https addresses; NO_PROXY exempts the host.
    let before = proxy.tunnels.lock().unwrap().len();
    for env in [
        &[("HTTP_PROXY", proxy.url.as_str())][..],
        &[
            ("HTTPS_PROXY", proxy.url.as_str()),
            ("NO_PROXY", "127.0.0.1"),
        ][..],
    ] {
        let out = dry_run(&file, env);
        assert!(answered_successful(&out), "{env:?}: {out:?}");
    }
    assert_eq!(proxy.tunnels.lock().unwrap().len(), before);
    assert_eq!(prometheus.requests(), 5);
}
