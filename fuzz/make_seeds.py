#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from the repository's fixtures and
examples (the Go host's gob fixtures, the example templates and recordings) plus a few
hand-written cases. Run from the repository root: python3 fuzz/make_seeds.py"""
import hashlib
import json
import os
import struct
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(*p):
    with open(os.path.join(ROOT, *p), "rb") as f:
        return f.read()


# --- gob / net/rpc request streams (tests/gohost/cmd/gobfixtures output) --------------------
plugin = read("tests/fixtures/goplugin/plugin_requests.bin")
control = read("tests/fixtures/goplugin/control_requests.bin")
put("gob_requests", plugin)
put("gob_requests", control)


# --- whole plugin sessions: the fixtures framed as yamux streams ------------------------------
def hdr(ty, flags, stream, length):
    return struct.pack(">BBHII", 0, ty, flags, stream, length)


SYN, ACK, FIN, RST = 1, 2, 4, 8
DATA, WINDOW, PING, GOAWAY = 0, 1, 2, 3


def data(stream, payload, chunk=4096):
    out = b""
    for i in range(0, len(payload), chunk):
        part = payload[i : i + chunk]
        out += hdr(DATA, 0, stream, len(part)) + part
    return out


def session(control_bytes, plugin_bytes):
    s = hdr(WINDOW, SYN, 1, 0) + data(1, control_bytes)
    s += hdr(WINDOW, SYN, 3, 0) + hdr(WINDOW, FIN, 3, 0)
    s += hdr(WINDOW, SYN, 5, 0) + hdr(WINDOW, FIN, 5, 0)
    # The host opens the plugin stream once Dispense has answered (fuzz_targets/plugin_session.rs).
    s += b"--settle--"
    s += hdr(WINDOW, SYN, 7, 0) + data(7, struct.pack("<I", 1) + plugin_bytes)
    s += hdr(PING, SYN, 0, 7) + hdr(WINDOW, FIN, 7, 0) + hdr(WINDOW, FIN, 1, 0)
    return s


# Ping and Dispense only (the fixture's last call is Quit).
put("plugin_session", session(control, plugin))
put("plugin_session", session(control, plugin)[: 4096])
put("plugin_session", hdr(WINDOW, SYN, 1, 0) + hdr(PING, SYN, 0, 1) + hdr(GOAWAY, 0, 0, 0))
put("plugin_session", hdr(WINDOW, SYN, 1, 0) + hdr(DATA, RST, 1, 0) + hdr(WINDOW, SYN, 1, 0))
put("plugin_session", hdr(WINDOW, SYN, 1, 0) + hdr(DATA, 0, 1, 300000) + b"x" * 64)

# --- yamux headers --------------------------------------------------------------------------
for h in [hdr(DATA, SYN, 1, 5), hdr(WINDOW, ACK, 3, 262144), hdr(PING, SYN, 0, 9),
          hdr(GOAWAY, 0, 0, 2), b"\x01" + hdr(DATA, 0, 1, 0)[1:], hdr(4, 0, 0, 0)]:
    put("yamux_header", h)

# --- templates, specs, PromQL and conditions from the examples --------------------------------
conditions = set()
queries = set()
for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
    if not name.endswith(".yaml") or name.endswith(".replay.json"):
        continue
    text = read("examples", name)
    put("template", text)
    for doc in yaml.safe_load_all(text):
        for m in ((doc or {}).get("spec") or {}).get("metrics") or []:
            for k in ("successCondition", "failureCondition"):
                if m.get(k):
                    conditions.add(m[k])
            prov = m.get("provider") or {}
            for spec in (prov.get("plugin") or {}).values():
                put("spec", json.dumps(spec))
                put("spec", yaml.safe_dump(spec))
                for k in ("query",):
                    if spec.get(k):
                        queries.add(spec[k])
                if (spec.get("minRequests") or {}).get("query"):
                    queries.add(spec["minRequests"]["query"])
            if (prov.get("prometheus") or {}).get("query"):
                queries.add(prov["prometheus"]["query"])
for c in sorted(conditions) + [
    "len(result) == 0 || result[0] < 0.01",
    "all(result, {# < 0.5}) && median(result) <= 4",
    "result.p99 > 0.2 or any(result, isNaN(#))",
    'string(result[0]) matches "^0\\\\.[0-9]+$"',
    "max(result) - min(result) < 1e-3 and count(result, {# > 1}) == 0",
    "sum(result) / len(result) >= 0.9 ? true : false",
]:
    put("condition", c + "\x00[0.004, 4, 1e308]")
    put("condition", c + "\x00{\"p99\": 0.3}")
    put("condition", c)
for q in sorted(queries) + ["up", 'histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))',
                             "1 / 0", "sum(rate(a[5m])) / on(job) group_left sum(b)"]:
    put("promql", q)

# --- Prometheus answers: the examples' recordings, each with status selector 0 (HTTP 200) ----
bodies = set()
for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
    if name.endswith(".replay.json"):
        for e in json.loads(read("examples", name))["entries"]:
            bodies.add(e["body"])
bodies |= {
    '{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"4242.5"]}]}}',
    '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1,"4242.5"],[2,"NaN"]]}]}}',
    '{"status":"success","data":{"resultType":"scalar","result":[1,"4242.5"]},"warnings":["partial"]}',
    '{"status":"error","errorType":"bad_data","error":"parse error"}',
    '{"status":"success","data":{"resultType":"vector","result":[]},"infos":["PromQL info: x"]}',
}
for b in sorted(bodies):
    put("prometheus_response", b"\x00" + b.encode())

# --- serve bodies (Flagger payloads, web-provider bodies) -------------------------------------
spec = {"query": "sum(rate(errors[5m]))", "noData": "fail",
        "prometheus": {"address": "http://127.0.0.1:9090"}}
for b in [
    {"name": "podinfo", "namespace": "test", "phase": "Progressing", "checksum": "abc",
     "metadata": {"template": "error-rate", "service": "podinfo"}},
    {"name": "podinfo", "namespace": "test", "metadata": {"spec": json.dumps(spec),
     "successCondition": "result[0] < 0.01", "hook": "pre-rollout"}},
    {"template": "error-rate", "metric": "error-ratio", "args": {"service": "canary"}},
    {"spec": spec, "name": "inline", "args": {"a": "b"}},
    {"spec": {"query": "{{args.q}}", "noData": "pass"}, "args": {"q": "up"}},
]:
    put("serve_bodies", json.dumps(b))


# --- gRPC requests (protobuf wire format, written by hand: field numbers from the .proto) -----
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def metric(spec_json, cond="result[0] < 0.01"):
    return field(1, "m") + field(2, cond) + field(4, "1m") + field(11, spec_json)


run = field(1, "run-1") + field(2, "ns") + field(3, "uid") + field(5, varint(8) + varint(1700000000))
measurement = varint(1 << 3) + varint(2) + field(2, "message") + field(3, "[0.5]")
sj = json.dumps(spec)
for sel, msg in [
    (0, field(1, run) + field(2, metric(sj))),
    (0, field(2, metric(json.dumps({"query": "{{args.q}}", "noData": "pass"})))),
    (1, field(1, run) + field(2, metric(sj)) + field(3, measurement)),
    (2, field(1, run) + field(2, metric(sj)) + field(3, measurement)),
    (3, field(1, run) + field(2, metric(sj)) + varint(3 << 3) + varint(5)),
    (4, field(1, metric(sj))),
    (5, field(1, metric(json.dumps({"query": "{{args.q}}", "noData": "fail"})))
     + field(2, field(1, "q") + field(2, "up"))),
    (6, b""),
    (7, b""),
]:
    put("grpc_messages", bytes([sel]) + msg)
