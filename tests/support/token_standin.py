#!/usr/bin/env python3
"""Stand-in token endpoints and an authenticating gateway in front of a real Prometheus.

Written from the specifications, not from rollgate's code:
- OAuth2 client credentials: RFC 6749 section 4.4 (https://www.rfc-editor.org/rfc/rfc6749#section-4.4):
  POST form `grant_type=client_credentials` (+ `scope`, section 3.3, space-separated), client
  authentication with HTTP Basic where id and secret are form-urlencoded first (section 2.3.1),
  answer section 5.1 (`access_token`, `token_type`, `expires_in`, `Cache-Control: no-store`),
  errors section 5.2 (400 JSON `error`; 401 + `WWW-Authenticate` for `invalid_client`).
- Client assertion instead of a secret (Azure workload identity): RFC 7523 section 2.2 and
  Microsoft's "client credentials flow" with a federated credential
  (https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential):
  `client_id`, `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`
  and `client_assertion` in the form. The stand-in accepts the one assertion it wrote to
  `federated-token` beside the key (it does not validate a JWT it minted itself).
- JWT bearer grant: RFC 7523 sections 2.1 and 3 (https://www.rfc-editor.org/rfc/rfc7523) and
  Google's "Using OAuth 2.0 for Server to Server Applications"
  (https://developers.google.com/identity/protocols/oauth2/service-account#httprest): form
  `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` and `assertion`, a JWT signed RS256
  with claims iss (the service account's email), scope, aud (the token URI), iat and exp at most
  an hour after iat; a bad assertion is 400 `invalid_grant`.
- GKE/Compute Engine metadata server
  (https://cloud.google.com/compute/docs/access/authenticate-workloads#applications):
  GET /computeMetadata/v1/instance/service-accounts/default/token with header
  `Metadata-Flavor: Google` (403 without it), answering access_token/expires_in/token_type.
- The gateway (/prom/...) accepts `Authorization: Bearer <token>` for a token it issued and not
  yet expired (RFC 6750 section 2.1) and forwards the request to Prometheus; otherwise 401.

Usage: token_standin.py PROMETHEUS_URL KEY_JSON_PATH CLIENT_ID CLIENT_SECRET
Writes a service-account key for this server (its own RSA key, token_uri pointing here) to
KEY_JSON_PATH, prints the port, and serves until stdin closes. GET /stats gives the counts;
POST /control (JSON) changes behaviour: expires_in, token_status (an HTTP status for the token
endpoints, 401 answers invalid_client echoing the secret presented), malformed (a 200 body that
is no token answer), delay (seconds before a token answer), gateway_echo (a 401 from the gateway
that echoes the token presented), backend (another Prometheus URL, e.g. a closed port).
"""

import base64
import json
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

PROMETHEUS, KEY_PATH, CLIENT_ID, CLIENT_SECRET = sys.argv[1:5]
EMAIL = "rollgate-test@example-project.iam.gserviceaccount.com"
LOCK = threading.Lock()
STATE = {
    "counts": {"oauth2": 0, "google": 0, "metadata": 0, "proxied": 0, "rejected": 0},
    "last_form": {},
    "tokens": {},  # token -> expiry (unix seconds)
    "expires_in": 3600,
    "token_status": 200,
    "malformed": None,
    "delay": 0.0,
    "gateway_echo": False,
    "backend": None,
}
PRIVATE = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PUBLIC = PRIVATE.public_key()
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def b64url_decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json", extra=()):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def issue(self, kind):
        with LOCK:
            STATE["counts"][kind] += 1
            status, malformed, delay = STATE["token_status"], STATE["malformed"], STATE["delay"]
            expires_in = STATE["expires_in"]
        if delay:
            time.sleep(delay)
        if malformed is not None:
            return self.reply(200, malformed)
        if status != 200:
            return None, status
        token = "ya29." + secrets.token_urlsafe(24)
        with LOCK:
            STATE["tokens"][token] = time.time() + expires_in
        self.reply(200, json.dumps({"access_token": token, "token_type": "Bearer",
                                    "expires_in": expires_in}))
        return token, 200

    def token_error(self, status, error, description):
        extra = [("WWW-Authenticate", 'Basic realm="standin"')] if status == 401 else []
        self.reply(status, json.dumps({"error": error, "error_description": description}),
                   extra=extra)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/stats":
            with LOCK:
                return self.reply(200, json.dumps({"counts": STATE["counts"],
                                                   "last_form": STATE["last_form"]}))
        if path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, "Missing Metadata-Flavor:Google header.", "text/plain")
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            with LOCK:
                STATE["last_form"] = {k: v[0] for k, v in query.items()}
            token, status = self.issue("metadata") or (None, 200)
            if token is None and status != 200:
                self.reply(status, "metadata server unavailable", "text/plain")
            return
        if path.startswith("/prom/"):
            return self.gateway(b"")
        self.reply(404, "{}")

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        body = self.body()
        if path == "/control":
            with LOCK:
                STATE.update(json.loads(body))
            return self.reply(200, "{}")
        if path.startswith("/prom/"):
            return self.gateway(body)
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}
        if self.headers.get("Content-Type", "").split(";")[0] != "application/x-www-form-urlencoded":
            return self.token_error(400, "invalid_request", "form body expected")
        with LOCK:
            STATE["last_form"] = form
        if path == "/oauth2/token":
            return self.oauth2(form)
        if path == "/google/token":
            return self.google(form)
        self.reply(404, "{}")

    def oauth2(self, form):
        auth = self.headers.get("Authorization", "")
        presented = ""
        ok = False
        if form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            presented = form.get("client_assertion", "")
            ok = form.get("client_id") == CLIENT_ID and presented == ASSERTION and not auth
        elif auth.startswith("Basic "):
            try:
                pair = base64.b64decode(auth[6:]).decode()
                cid, _, secret = pair.partition(":")
                cid, secret = urllib.parse.unquote_plus(cid), urllib.parse.unquote_plus(secret)
                presented = secret
                ok = cid == CLIENT_ID and secret == CLIENT_SECRET
            except Exception:
                ok = False
        with LOCK:
            forced = STATE["token_status"]
        if forced == 401 or not ok:
            with LOCK:
                STATE["counts"]["oauth2"] += 1
            # A careless endpoint echoing what it was sent: rollgate must not repeat it.
            return self.token_error(401, "invalid_client", f"client secret {presented} is wrong")
        if form.get("grant_type") != "client_credentials":
            return self.token_error(400, "unsupported_grant_type", form.get("grant_type", ""))
        token, status = self.issue("oauth2") or (None, 200)
        if token is None and status != 200:
            self.token_error(status, "temporarily_unavailable", "try later")

    def google(self, form):
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return self.token_error(400, "unsupported_grant_type", form.get("grant_type", ""))
        why = self.check_assertion(form.get("assertion", ""))
        if why:
            with LOCK:
                STATE["counts"]["google"] += 1
            return self.token_error(400, "invalid_grant", why)
        token, status = self.issue("google") or (None, 200)
        if token is None and status != 200:
            self.token_error(status, "invalid_grant", "refused")

    def check_assertion(self, assertion):
        parts = assertion.split(".")
        if len(parts) != 3:
            return "Invalid JWT: not three parts"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except Exception:
            return "Invalid JWT: undecodable"
        if header.get("alg") != "RS256":
            return "Invalid JWT: alg must be RS256"
        try:
            PUBLIC.verify(signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                          hashes.SHA256())
        except InvalidSignature:
            return "Invalid JWT Signature."
        now = time.time()
        if claims.get("iss") != EMAIL:
            return "Invalid JWT: iss"
        if claims.get("aud") != f"http://127.0.0.1:{PORT}/google/token":
            return "Invalid JWT: aud"
        if not claims.get("scope"):
            return "Invalid JWT: no scope"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "Invalid JWT: iat/exp"
        if abs(iat - now) > 60 or exp <= now or exp - iat > 3600:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."
        return None

    def gateway(self, body):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with LOCK:
            expiry = STATE["tokens"].get(token)
            echo = STATE["gateway_echo"]
        if expiry is None or expiry < time.time() or echo:
            with LOCK:
                STATE["counts"]["rejected"] += 1
            message = f"token {token} is not valid here" if echo else "unauthorized"
            return self.reply(401, message, "text/plain")
        with LOCK:
            STATE["counts"]["proxied"] += 1
        with LOCK:
            backend = STATE["backend"] or PROMETHEUS
        target = backend + self.path[len("/prom"):]
        request = urllib.request.Request(target, data=body if self.command == "POST" else None,
                                         method=self.command)
        if self.headers.get("Content-Type"):
            request.add_header("Content-Type", self.headers["Content-Type"])
        try:
            with NO_PROXY.open(request, timeout=10) as answer:
                self.reply(answer.status, answer.read(), answer.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as e:
            self.reply(e.code, e.read(), e.headers.get("Content-Type", "text/plain"))
        except OSError as e:
            self.reply(502, f"backend unreachable: {e}", "text/plain")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
PORT = server.server_address[1]
key = {
    "type": "service_account",
    "project_id": "example-project",
    "private_key_id": secrets.token_hex(20),
    "private_key": PRIVATE.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode(),
    "client_email": EMAIL,
    "client_id": "1234567890",
    "token_uri": f"http://127.0.0.1:{PORT}/google/token",
}
with open(KEY_PATH, "w") as f:
    json.dump(key, f)
ASSERTION = "eyJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(32) + "." + secrets.token_urlsafe(32)
with open(os.path.join(os.path.dirname(KEY_PATH), "federated-token"), "w") as f:
    f.write(ASSERTION + "\n")
threading.Thread(target=server.serve_forever, daemon=True).start()
print(PORT, flush=True)
sys.stdin.read()
os._exit(0)
