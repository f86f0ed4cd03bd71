#!/usr/bin/env python3
"""A stand-in for Amazon Managed Service for Prometheus and for STS, for rollgate's tests.

Query endpoint: every request's SigV4 signature is recomputed with botocore's own signer
(botocore.auth.SigV4Auth: canonical request, string to sign, signature) from the signed headers,
the query and the body as received, and compared; a request that passes is forwarded to the
upstream Prometheus and its answer returned. Refusals use the messages AWS's API front end
gives (403, JSON `message`, `x-amzn-ErrorType`): unknown key, wrong region or service, a date
more than five minutes from the server's clock, a signature that does not match.

STS (`POST /sts/`): AssumeRoleWithWebIdentity as the API reference describes it
(https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html):
form parameters Action, Version, RoleArn, RoleSessionName, WebIdentityToken; the answer's
Credentials (AccessKeyId, SecretAccessKey, SessionToken, Expiration) in its XML, errors as
<ErrorResponse><Error><Code>. Each distinct token gets its own key pair, valid on the query
endpoint with its session token; tokens `expired` and `invalid` get ExpiredTokenException and
InvalidIdentityToken.

Prints `READY <port>` once listening. Each verified request appends `<access key id>` to --log.
"""

import argparse
import datetime
import hashlib
import json
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

KEYS = {}  # access key id -> (secret, session token or None)
LOCK = threading.Lock()
ARGS = None


def now():
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ARGS.skew)


def amz(t):
    return t.strftime("%Y%m%dT%H%M%SZ")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body, content_type="application/json", extra=()):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, error_type, message):
        self.reply(403, json.dumps({"message": message}), extra=[("x-amzn-ErrorType", error_type)])

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.handle_query(b"")

    def do_POST(self):
        body = self.body()
        if self.path.startswith("/sts/"):
            self.handle_sts(body)
        else:
            self.handle_query(body)

    def handle_sts(self, body):
        form = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            return self.sts_error(400, "InvalidAction", "unknown action")
        for p in ("RoleArn", "RoleSessionName", "WebIdentityToken"):
            if not form.get(p):
                return self.sts_error(400, "MissingParameter", f"{p} is missing")
        token = form["WebIdentityToken"]
        if token == "expired":
            return self.sts_error(400, "ExpiredTokenException", "Token expired: current date/time 1 must be before the expiration date/time 0")
        if token == "invalid":
            return self.sts_error(400, "InvalidIdentityToken", "Couldn't retrieve verification key from your identity provider")
        digest = hashlib.sha256(token.encode()).hexdigest()
        key_id = "ASIA" + digest[:16].upper()
        secret = "sts-secret-" + digest[16:40]
        session = "sts-session-" + digest[40:]
        with LOCK:
            KEYS[key_id] = (secret, session)
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ARGS.sts_lifetime)
        xml = (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult>"
            f"<SubjectFromWebIdentityToken>system:serviceaccount:argo-rollouts:argo-rollouts</SubjectFromWebIdentityToken>"
            f"<AssumedRoleUser><Arn>{form['RoleArn']}/{form['RoleSessionName']}</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>"
            f"<Credentials><SessionToken>{session}</SessionToken><SecretAccessKey>{secret}</SecretAccessKey>"
            f"<Expiration>{expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration><AccessKeyId>{key_id}</AccessKeyId></Credentials>"
            "<Audience>sts.amazonaws.com</Audience>"
            "</AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>"
        )
        self.reply(200, xml, "text/xml")

    def sts_error(self, status, code, message):
        xml = (
            '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            f"<Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            "<RequestId>x</RequestId></ErrorResponse>"
        )
        self.reply(status, xml, "text/xml")

    def handle_query(self, body):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return self.refuse("MissingAuthenticationTokenException", "Missing Authentication Token")
        parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        key_id, date, region, service, terminal = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
        with LOCK:
            known = KEYS.get(key_id)
        token = self.headers.get("X-Amz-Security-Token")
        if known is None or known[1] != token:
            message = "The security token included in the request is invalid."
            if ARGS.echo_token and token:
                message += f" (token {token})"
            return self.refuse("UnrecognizedClientException", message)
        if region != ARGS.region:
            return self.refuse("InvalidSignatureException", "Credential should be scoped to a valid region. ")
        if service != ARGS.service:
            return self.refuse("InvalidSignatureException", f"Credential should be scoped to correct service: '{ARGS.service}'. ")
        stamp = self.headers.get("X-Amz-Date", "")
        try:
            sent = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return self.refuse("IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
        t = now()
        if sent < t - datetime.timedelta(minutes=5):
            return self.refuse("InvalidSignatureException", f"Signature expired: {stamp} is now earlier than {amz(t - datetime.timedelta(minutes=5))} ({amz(t)} - 5 min.)")
        if sent > t + datetime.timedelta(minutes=5):
            return self.refuse("InvalidSignatureException", f"Signature not yet current: {stamp} is still later than {amz(t + datetime.timedelta(minutes=5))} ({amz(t)} + 5 min.)")
        if date != stamp[:8] or terminal != "aws4_request":
            return self.refuse("InvalidSignatureException", "Credential scope does not match the date.")
        # botocore's signer on the request as received: the signed headers only, the query
        # decoded and re-encoded the way AWS canonicalises it, the body as sent.
        split = urllib.parse.urlsplit(self.path)
        headers = {h: self.headers.get(h, "") for h in signed}
        request = AWSRequest(
            method=self.command,
            url=f"http://{self.headers.get('Host')}{split.path}",
            data=body,
            headers=headers,
            params=urllib.parse.parse_qsl(split.query, keep_blank_values=True),
        )
        request.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(key_id, known[0], token), service, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if signer.signed_headers(signer.headers_to_sign(request)) != parts["SignedHeaders"] or expected != parts["Signature"]:
            return self.refuse(
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided. "
                "Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
            )
        if ARGS.log:
            with LOCK, open(ARGS.log, "a") as f:
                f.write(f"{key_id}\n")
        self.forward(body)

    def forward(self, body):
        url = ARGS.upstream + self.path
        req = urllib.request.Request(url, data=body if self.command == "POST" else None, method=self.command)
        for name in ["Content-Type"] + ARGS.forward_header:
            if self.headers.get(name):
                req.add_header(name, self.headers[name])
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                self.reply(r.status, r.read(), r.headers.get("Content-Type", "application/json"))
        except urllib.error.HTTPError as e:
            self.reply(e.code, e.read(), e.headers.get("Content-Type", "application/json"))
        except OSError as e:
            self.reply(502, json.dumps({"message": f"upstream unreachable: {e}"}))


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--service", default="aps")
    p.add_argument("--key", action="append", default=[], help="ACCESS_KEY_ID=SECRET[=SESSION_TOKEN]")
    p.add_argument("--skew", type=float, default=0, help="seconds added to this server's clock")
    p.add_argument("--sts-lifetime", type=int, default=3600)
    p.add_argument("--echo-token", action="store_true", help="echo the session token in refusals")
    p.add_argument("--log")
    p.add_argument("--forward-header", action="append", default=[], help="also pass this request header upstream (moto reads Authorization and X-Amz-Target)")
    ARGS = p.parse_args()
    for k in ARGS.key:
        fields = k.split("=")
        KEYS[fields[0]] = (fields[1], fields[2] if len(fields) > 2 else None)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    # Stops with its parent: the test closes stdin (or dies).
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
