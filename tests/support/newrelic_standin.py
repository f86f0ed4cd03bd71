#!/usr/bin/env python3
"""A stand-in for New Relic's NerdGraph NRQL API, for rollgate's tests.

Written from New Relic's public documentation (read 2026-12):
- NerdGraph tutorial "Query your data using NRQL"
  (docs.newrelic.com/docs/apis/nerdgraph/examples/nerdgraph-nrql-tutorial): POST the GraphQL
  document `actor { account(id) { nrql(query) { results } } }` to /graphql with the user key
  in the `API-Key` header; the answer is `{"data": {"actor": {"account": {"nrql":
  {"results": [{"count": 1000}]}}}}}`.
- "NerdGraph usage limits" (docs.newrelic.com/docs/apis/nerdgraph/nerdgraph-usage-limits):
  too many concurrent requests are rejected with HTTP 429.
- "Set a query's time range" (docs.newrelic.com/docs/nrql/using-nrql/query-time-range):
  without SINCE a query covers the last hour; SINCE/UNTIL take `N unit ago`, `now` or epoch
  milliseconds.
- NRQL reference (docs.newrelic.com/docs/nrql/nrql-syntax-clauses-functions): FACET rows carry
  `facet` and each faceted attribute; TIMESERIES rows carry `beginTimeSeconds` and
  `endTimeSeconds`; result keys are `function.attribute` (`average.duration`), `percentile`
  answers `{"percentile.duration": {"99": …}}`.
- GraphQL errors come with HTTP 200 and an `errors` list; a bad key carries
  `extensions.error_code: BAD_API_KEY` (what newrelic-client-go v2, internal/http/graphql.go,
  `IsUnauthorized`, reads).

It evaluates a small NRQL subset over generated `Transaction` events (attributes `appName`,
`error`, `duration`): SELECT count(*), sum/average/min/max(attr), percentile(attr, p…),
percentage(count(*), WHERE …) [AS 'name']; FROM; WHERE with =, !=, <, <=, >, >=, IS [NOT]
TRUE/FALSE/NULL, AND, OR, parentheses; FACET attr[, attr]; SINCE/UNTIL; TIMESERIES [n unit];
LIMIT (ignored). Anything else is an NRQL syntax error, as on the real service.

Arguments: API key, account id, base time (Unix seconds: the newest events are just before
it; events cover the two hours before). Prints its port, serves until stdin closes.

Paths select behaviours so that tests sharing one process do not interfere:
  /graphql              the API
  /slow/graphql         the API after 5 s
  /garbage/graphql      HTTP 200 with an HTML body
  /ratelimit/graphql    HTTP 429, Retry-After: 30
  /unauthorized/graphql HTTP 401 with a GraphQL error body
  /echo/graphql         the API, with the caller's key echoed into a facet and a string field
  /echo-error/graphql   a GraphQL error whose message quotes the caller's key
  /down/graphql         HTTP 503
  /canned/graphql       answers the rows the NRQL text holds as JSON (for Argo's test cases)
GET /stats answers {"requests": {path: count}, "variables": [the last 500 queries' variables]}.
"""

import bisect
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY, ACCOUNT, BASE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

# appName: (seconds between events, every n-th is an error (0: never), duration factor)
APPS = {
    "healthy": (2, 100, 1.0),
    "bad": (2, 5, 1.0),
    "lowtraffic": (60, 100, 1.0),
    "cmp-stable": (1, 100, 1.0),
    "cmp-canary-same": (1, 100, 1.0),
    "cmp-canary-bad": (1, 10, 1.0),
    "lat-stable": (1, 0, 1.0),
    "lat-canary-slow": (1, 0, 2.0),
}
SPAN = 2 * 3600


def generate():
    events = []
    for app, (every, err_every, factor) in APPS.items():
        i = 0
        t = BASE - SPAN
        while t < BASE:
            events.append({
                "timestamp": t * 1000,
                "appName": app,
                "error": err_every > 0 and i % err_every == err_every - 1,
                "duration": round((0.1 + (i % 10) * 0.01) * factor, 6),
            })
            i += 1
            t += every
    events.sort(key=lambda e: e["timestamp"])
    return events


EVENTS = generate()
TIMES = [e["timestamp"] for e in EVENTS]


class NrqlError(Exception):
    pass


TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^'\\]|\\.)*')|(?P<tick>`[^`]*`)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.]*)|(?P<op>!=|<=|>=|[*,()=<>]))"
)


def tokenize(q):
    out, pos = [], 0
    q = q.rstrip()
    while pos < len(q):
        m = TOKEN.match(q, pos)
        if not m or m.end() == pos:
            raise NrqlError(f"NRQL Syntax Error: Error at position {pos}")
        pos = m.end()
        kind = m.lastgroup
        text = m.group(kind)
        if kind == "str":
            out.append(("str", text[1:-1].replace("\\'", "'")))
        elif kind == "tick":
            out.append(("word", text[1:-1]))
        elif kind == "num":
            out.append(("num", float(text)))
        else:
            out.append((kind, text))
    return out


UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
CLAUSES = {"where", "facet", "since", "until", "timeseries", "limit", "select", "from"}


class Parser:
    def __init__(self, q, now_ms):
        self.t = tokenize(q)
        self.i = 0
        self.now_ms = now_ms

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)

    def word(self):
        kind, text = self.peek()
        return text.lower() if kind == "word" else None

    def take(self, kind=None, text=None):
        k, v = self.peek()
        if k is None or (kind and k != kind) or (text and (k != "word" and k != "op" or str(v).lower() != text)):
            raise NrqlError(f"NRQL Syntax Error: unexpected {v!r} at token {self.i}")
        self.i += 1
        return v

    def query(self):
        q = {"items": None, "from": None, "where": None, "facet": None, "since": None,
             "until": None, "timeseries": None}
        while self.peek()[0] is not None:
            w = self.word()
            if w == "select":
                self.take()
                q["items"] = self.items()
            elif w == "from":
                self.take()
                q["from"] = self.take("word")
            elif w == "where":
                self.take()
                q["where"] = self.cond()
            elif w == "facet":
                self.take()
                attrs = [self.take("word")]
                while self.peek() == ("op", ","):
                    self.take()
                    attrs.append(self.take("word"))
                q["facet"] = attrs
            elif w in ("since", "until"):
                self.take()
                q[w] = self.time()
            elif w == "timeseries":
                self.take()
                step = 60
                if self.peek()[0] == "num":
                    n = self.take("num")
                    step = n * self.unit()
                elif self.word() in ("auto", "max"):
                    self.take()
                q["timeseries"] = step
            elif w == "limit":
                self.take()
                if self.word() == "max":
                    self.take()
                else:
                    self.take("num")
            else:
                raise NrqlError(f"NRQL Syntax Error: unexpected {self.peek()[1]!r}")
        if not q["items"] or not q["from"]:
            raise NrqlError("NRQL Syntax Error: a query needs SELECT and FROM")
        return q

    def unit(self):
        w = self.take("word").lower().rstrip("s")
        if w not in UNITS:
            raise NrqlError(f"NRQL Syntax Error: unknown time unit {w!r}")
        return UNITS[w]

    def time(self):
        if self.word() == "now":
            self.take()
            return self.now_ms
        n = self.take("num")
        if self.word() is not None and self.word().rstrip("s") in UNITS:
            secs = n * self.unit()
            self.take("word", "ago")
            return self.now_ms - secs * 1000
        return n

    def items(self):
        items = [self.item()]
        while self.peek() == ("op", ","):
            self.take()
            items.append(self.item())
        return items

    def item(self):
        fn = self.take("word").lower()
        self.take("op", "(")
        if fn == "count":
            self.take("op", "*")
            item = ("count", None, None, "count")
        elif fn in ("sum", "average", "min", "max"):
            attr = self.take("word")
            item = (fn, attr, None, f"{fn}.{attr}")
        elif fn == "percentile":
            attr = self.take("word")
            ps = []
            while self.peek() == ("op", ","):
                self.take()
                ps.append(self.take("num"))
            item = ("percentile", attr, ps or [50.0], f"percentile.{attr}")
        elif fn == "percentage":
            self.take("word", "count")
            self.take("op", "(")
            self.take("op", "*")
            self.take("op", ")")
            self.take("op", ",")
            self.take("word", "where")
            item = ("percentage", None, self.cond(), "percentage")
        else:
            raise NrqlError(f"NRQL Syntax Error: unknown function {fn!r}")
        self.take("op", ")")
        if self.word() == "as":
            self.take()
            item = item[:3] + (self.take("str"),)
        return item

    def cond(self):
        left = self.conj()
        while self.word() == "or":
            self.take()
            right = self.conj()
            left = ("or", left, right)
        return left

    def conj(self):
        left = self.atom()
        while self.word() == "and":
            self.take()
            right = self.atom()
            left = ("and", left, right)
        return left

    def atom(self):
        if self.peek() == ("op", "("):
            self.take()
            c = self.cond()
            self.take("op", ")")
            return c
        attr = self.take("word")
        if self.word() == "is":
            self.take()
            negate = self.word() == "not"
            if negate:
                self.take()
            v = self.take("word").lower()
            if v not in ("true", "false", "null"):
                raise NrqlError("NRQL Syntax Error: IS takes TRUE, FALSE or NULL")
            value = {"true": True, "false": False, "null": None}[v]
            return ("is", attr, value, negate)
        kind, op = self.peek()
        if kind != "op" or op not in ("=", "!=", "<", "<=", ">", ">="):
            raise NrqlError(f"NRQL Syntax Error: expected a comparison after {attr!r}")
        self.take()
        kind, value = self.peek()
        if kind not in ("str", "num"):
            raise NrqlError("NRQL Syntax Error: expected a value")
        self.take()
        return ("cmp", attr, op, value)


def matches(cond, e):
    if cond is None:
        return True
    tag = cond[0]
    if tag == "and":
        return matches(cond[1], e) and matches(cond[2], e)
    if tag == "or":
        return matches(cond[1], e) or matches(cond[2], e)
    if tag == "is":
        _, attr, value, negate = cond
        return (e.get(attr) is value) != negate
    _, attr, op, value = cond
    v = e.get(attr)
    if v is None or isinstance(v, bool) or type(v) is not type(value) and not (
        isinstance(v, (int, float)) and isinstance(value, (int, float))
    ):
        return op == "!="
    return {"=": v == value, "!=": v != value, "<": v < value, "<=": v <= value,
            ">": v > value, ">=": v >= value}[op]


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def number(x):
    return int(x) if isinstance(x, float) and x.is_integer() and abs(x) < 2**53 else x


def aggregate(items, events):
    row = {}
    for fn, attr, arg, name in items:
        if fn == "count":
            row[name] = len(events)
        elif fn == "percentage":
            row[name] = (100.0 * sum(1 for e in events if matches(arg, e)) / len(events)
                         if events else None)
        else:
            vals = [e[attr] for e in events if isinstance(e.get(attr), (int, float))
                    and not isinstance(e.get(attr), bool)]
            if fn == "sum":
                row[name] = number(sum(vals))
            elif fn == "average":
                row[name] = sum(vals) / len(vals) if vals else None
            elif fn == "min":
                row[name] = min(vals) if vals else None
            elif fn == "max":
                row[name] = max(vals) if vals else None
            else:
                row[name] = {("%g" % p): percentile(vals, p) for p in arg}
    return row


def run(nrql, now_ms):
    q = Parser(nrql, now_ms).query()
    if q["from"] != "Transaction":
        return []
    until = q["until"] if q["until"] is not None else now_ms
    since = q["since"] if q["since"] is not None else until - 3600_000
    lo, hi = bisect.bisect_left(TIMES, since), bisect.bisect_left(TIMES, until)
    events = [e for e in EVENTS[lo:hi] if matches(q["where"], e)]

    def facet_groups(evs):
        if not q["facet"]:
            return [(None, evs)]
        groups = {}
        for e in evs:
            key = tuple(e.get(a) for a in q["facet"])
            groups.setdefault(key, []).append(e)
        return sorted(groups.items(), key=lambda kv: -len(kv[1]))

    def with_facet(row, key):
        if key is None:
            return row
        for a, v in zip(q["facet"], key):
            row[a] = v
        row["facet"] = key[0] if len(key) == 1 else list(key)
        return row

    if q["timeseries"] is None:
        if q["facet"]:
            return [with_facet(aggregate(q["items"], evs), key) for key, evs in facet_groups(events)]
        return [aggregate(q["items"], events)]
    step_ms = int(q["timeseries"] * 1000)
    rows = []
    keys = [k for k, _ in facet_groups(events)]
    start = since
    while start < until:
        end = min(start + step_ms, until)
        bucket = [e for e in events if start <= e["timestamp"] < end]
        for key in keys:
            evs = bucket if key is None else [
                e for e in bucket if tuple(e.get(a) for a in q["facet"]) == key]
            row = {"beginTimeSeconds": number(start / 1000), "endTimeSeconds": number(end / 1000)}
            row.update(aggregate(q["items"], evs))
            rows.append(with_facet(row, key))
        start = end
    return rows


STATS = {"requests": {}, "variables": []}
LOCK = threading.Lock()


def gql_error(message, **extensions):
    err = {"message": message}
    if extensions:
        err["extensions"] = extensions
    return {"errors": [err]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                self.reply(200, STATS)
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        mode = self.path[: -len("/graphql")].strip("/") if self.path.endswith("/graphql") else None
        with LOCK:
            STATS["requests"][self.path] = STATS["requests"].get(self.path, 0) + 1
        if mode is None:
            return self.reply(404, {"error": "not found"})
        key = self.headers.get("API-Key", "")
        if mode == "slow":
            time.sleep(5)
        if mode == "garbage":
            return self.reply(200, b"<html><body>502 upstream hiccup</body></html>")
        if mode == "ratelimit":
            return self.reply(429, gql_error("Too many concurrent requests"), [("Retry-After", "30")])
        if mode == "down":
            return self.reply(503, b"service unavailable")
        if mode == "unauthorized":
            return self.reply(401, gql_error("Unauthorized: the API key is not valid"))
        if mode == "echo-error":
            return self.reply(200, gql_error(f"NRQL Syntax Error near API-Key {key}",
                                             errorClass="INVALID_INPUT"))
        try:
            body = json.loads(raw)
            variables = body.get("variables") or {}
            document = body["query"]
        except (ValueError, KeyError, AttributeError):
            return self.reply(400, gql_error("Bad request: not a GraphQL request body"))
        with LOCK:
            STATS["variables"] = STATS["variables"][-499:] + [variables]
        if key != API_KEY:
            return self.reply(200, gql_error("Invalid API key", error_code="BAD_API_KEY"))
        if "nrql(query: $query" not in document or "results" not in document:
            return self.reply(200, gql_error("Cannot query field on type Actor"))
        if variables.get("accountId") != ACCOUNT:
            out = gql_error(f"Account {variables.get('accountId')} not found or not accessible",
                            errorClass="FORBIDDEN")
            out["data"] = {"actor": {"account": None}}
            return self.reply(200, out)
        if not isinstance(variables.get("timeout"), int) or variables["timeout"] <= 0:
            return self.reply(200, gql_error("Variable $timeout of type Seconds! was not provided"))
        if mode == "canned":
            # The "query" is the JSON list of result rows to answer (Argo's provider tests
            # feed the provider fixed results the same way).
            try:
                rows = json.loads(variables.get("query", ""))
            except ValueError:
                return self.reply(200, gql_error("NRQL Syntax Error", errorClass="INVALID_INPUT"))
            return self.reply(200, {"data": {"actor": {"account": {"nrql": {"results": rows}}}}})
        try:
            rows = run(str(variables.get("query", "")), int(time.time() * 1000))
        except NrqlError as e:
            out = gql_error(str(e), errorClass="INVALID_INPUT")
            out["data"] = {"actor": {"account": {"nrql": None}}}
            return self.reply(200, out)
        if mode == "echo":
            rows = [dict(r, facet=key, secret=key) for r in rows]
        self.reply(200, {"data": {"actor": {"account": {"nrql": {"results": rows}}}}})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
