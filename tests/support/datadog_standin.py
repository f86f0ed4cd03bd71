#!/usr/bin/env python3
"""Stand-in for Datadog's metrics query APIs (there is no Datadog server to run).

Written from Datadog's public API reference, not from rollgate's code:
- v1 "Query timeseries points", GET /api/v1/query?from=&to=&query= (seconds since the epoch)
  https://docs.datadoghq.com/api/latest/metrics/query-timeseries-points/ (API v1): answers
  `status` ("ok"), `res_type`, `query`, `from_date`/`to_date` (milliseconds), `group_by`,
  `series[]` with `metric`, `scope`, `tag_set`, `expression`, `interval`, `length`, `start`,
  `end`, `query_index`, `aggr` and `pointlist` ([[milliseconds, value or null], ...]).
- v2 "Query scalar data across multiple products", POST /api/v2/query/scalar (API v2):
  body {"data": {"type": "scalar_request", "attributes": {"from", "to" (milliseconds),
  "queries": [{"data_source": "metrics", "name", "query", "aggregator"}], "formulas"}}};
  answer {"data": {"type": "scalar_response", "attributes": {"columns": [{"name", "type":
  "group"|"number", "values", "meta"}]}}, "errors": ""}.
- v2 "Query timeseries data across multiple products", POST /api/v2/query/timeseries
  https://docs.datadoghq.com/api/latest/metrics/query-timeseries-data-across-multiple-products/
  (API v2): attributes add "interval" (milliseconds; `to` is exclusive); answer
  {"data": {"type": "timeseries_response", "attributes": {"series": [{"group_tags",
  "query_index", "unit"}], "times": [milliseconds], "values": [[value or null per time]]}}}.
- Authentication (https://docs.datadoghq.com/api/latest/authentication/): headers
  DD-API-KEY and DD-APPLICATION-KEY; a wrong or missing key is 403 {"errors": ["Forbidden"]}.
- Rate limits (https://docs.datadoghq.com/api/latest/rate-limits/): every answer carries
  X-RateLimit-Limit, -Period, -Remaining, -Reset (seconds until the reset) and -Name; over the
  limit, 429 {"errors": ["Rate limit of N requests in P seconds reached. ..."]}.

The stand-in does not parse Datadog's query language: each query string is looked up in a
table the test fills (POST /control). A query not in the table is an unknown metric: no series.

Table entry (by query string): {"groups": [{"tags": ["service:api"], "value": 0.25}]} or the
short form {"value": 0.25}; "value" may be null (Datadog's null point) or a list cycled per
minute ("value" at minute m is list[m % len]). Points are one per minute. The scalar API
aggregates a group's points in the window with the query's aggregator (last, avg/mean, sum,
min, max, area, l2norm; percentile as avg).

Faults (by query string, POST /control {"faults": {query: fault}}):
  {"rate_limit": N, "reset": S}   the next N requests get 429 with X-RateLimit-Reset: S
  {"delay": S}                    answer after S seconds
  {"garbage": true}               a 200 body that is not JSON
  {"status": C, "body": "..."}    this status and body (raw; e.g. Argo's test answers)
  {"echo": C}                     status C, the body echoing both keys presented

Usage: datadog_standin.py API_KEY APP_KEY. Prints the port, serves until stdin closes.
GET /stats?query=Q gives {"requests": n, "last": {...}} for that query (the last request's
method, path, from, to, interval, aggregator and whether both keys were right).
"""

import json
import math
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API_KEY, APP_KEY = sys.argv[1:3]
LOCK = threading.Lock()
TABLE = {}
FAULTS = {}
STATS = {}
LIMIT, PERIOD = 300, 3600


def groups_of(entry):
    if entry is None:
        return []
    if "groups" in entry:
        return entry["groups"]
    return [{"tags": [], "value": entry.get("value")}]


def value_at(group, t):
    v = group.get("value")
    if isinstance(v, list):
        return v[(t // 60) % len(v)] if v else None
    return v


def minutes(frm, to):
    """Minute-aligned times (seconds) in [frm, to]."""
    start = -(-frm // 60) * 60
    return list(range(start, to + 1, 60))


def aggregate(values, how):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if how == "last":
        return vals[-1]
    if how == "sum":
        return sum(vals)
    if how == "min":
        return min(vals)
    if how == "max":
        return max(vals)
    if how == "area":
        return sum(vals) * 60
    if how == "l2norm":
        return math.sqrt(sum(v * v for v in vals))
    return sum(vals) / len(vals)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        if url.path == "/stats":
            with LOCK:
                self.send(200, STATS.get(params.get("query"), {"requests": 0, "last": None}))
            return
        if url.path == "/api/v1/query":
            try:
                frm, to = int(params["from"]), int(params["to"])
                query = params["query"]
            except (KeyError, ValueError):
                self.send(400, {"errors": ["from, to and query are required integers/strings"]})
                return
            self.api(query, {"method": "GET", "path": url.path, "from": frm, "to": to},
                     lambda: self.v1(query, frm, to))
            return
        self.send(404, {"errors": ["Not found"]})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        raw = self.body()
        if url.path == "/control":
            settings = json.loads(raw or b"{}")
            with LOCK:
                TABLE.update(settings.get("series", {}))
                FAULTS.update(settings.get("faults", {}))
            self.send(200, {})
            return
        if url.path not in ("/api/v2/query/scalar", "/api/v2/query/timeseries"):
            self.send(404, {"errors": ["Not found"]})
            return
        try:
            attrs = json.loads(raw)["data"]["attributes"]
            frm, to = int(attrs["from"]), int(attrs["to"])
            q = attrs["queries"][0]
            query = q["query"]
        except (KeyError, ValueError, IndexError, TypeError):
            self.send(400, {"errors": ["invalid request body"]})
            return
        seen = {"method": "POST", "path": url.path, "from": frm, "to": to,
                "aggregator": q.get("aggregator"), "name": q.get("name"),
                "data_source": q.get("data_source"), "formulas": attrs.get("formulas"),
                "interval": attrs.get("interval"), "type": json.loads(raw)["data"].get("type")}
        if url.path.endswith("scalar"):
            self.api(query, seen, lambda: self.scalar(query, frm, to, q.get("aggregator") or "avg"))
        else:
            step = int(attrs.get("interval") or 60000)
            self.api(query, seen, lambda: self.timeseries(query, frm, to, step))

    def api(self, query, seen, answer):
        keys_ok = (self.headers.get("DD-API-KEY") == API_KEY
                   and self.headers.get("DD-APPLICATION-KEY") == APP_KEY)
        seen["keys_ok"] = keys_ok
        seen["content_type"] = self.headers.get("Content-Type")
        with LOCK:
            st = STATS.setdefault(query, {"requests": 0, "last": None})
            st["requests"] += 1
            st["last"] = seen
            fault = dict(FAULTS.get(query) or {})
            if fault.get("rate_limit"):
                FAULTS[query] = dict(fault, rate_limit=fault["rate_limit"] - 1)
        echo = fault.get("echo")
        if echo:
            presented = "DD-API-KEY=%s DD-APPLICATION-KEY=%s" % (
                self.headers.get("DD-API-KEY"), self.headers.get("DD-APPLICATION-KEY"))
            self.send(echo, {"errors": ["denied: " + presented]})
            return
        if not keys_ok:
            self.send(403, {"errors": ["Forbidden"]})
            return
        headers = {"X-RateLimit-Limit": str(LIMIT), "X-RateLimit-Period": str(PERIOD),
                   "X-RateLimit-Name": "query"}
        if fault.get("rate_limit"):
            headers.update({"X-RateLimit-Remaining": "0",
                            "X-RateLimit-Reset": str(fault.get("reset", 60))})
            self.send(429, {"errors": ["Rate limit of %d requests in %d seconds reached. "
                                       "Please try again later." % (LIMIT, PERIOD)]}, headers)
            return
        headers.update({"X-RateLimit-Remaining": str(LIMIT - 1),
                        "X-RateLimit-Reset": str(PERIOD)})
        if fault.get("delay"):
            time.sleep(float(fault["delay"]))
        if fault.get("garbage"):
            self.send(200, b"<html><body>502 Bad Gateway</body></html>", headers)
            return
        if "status" in fault:
            self.send(int(fault["status"]), fault.get("body", "").encode(), headers)
            return
        self.send(200, answer(), headers)

    def v1(self, query, frm, to):
        with LOCK:
            entry = TABLE.get(query)
        series = []
        times = minutes(frm, to)
        for i, g in enumerate(groups_of(entry)):
            points = [[t * 1000.0, value_at(g, t)] for t in times]
            scope = ",".join(g.get("tags") or []) or "*"
            series.append({"metric": query, "display_name": query, "scope": scope,
                           "tag_set": g.get("tags") or [], "expression": query,
                           "aggr": None, "interval": 60, "length": len(points),
                           "start": times[0] * 1000 if times else frm * 1000,
                           "end": times[-1] * 1000 if times else to * 1000,
                           "query_index": 0, "unit": None, "pointlist": points})
        return {"status": "ok", "res_type": "time_series", "resp_version": 1, "query": query,
                "message": "", "error": "", "from_date": frm * 1000, "to_date": to * 1000,
                "group_by": [], "series": series}

    def scalar(self, query, frm, to, how):
        with LOCK:
            entry = TABLE.get(query)
        groups = groups_of(entry)
        times = minutes(frm // 1000, to // 1000)
        columns = []
        tag_names = sorted({t.split(":", 1)[0] for g in groups for t in g.get("tags") or []})
        for name in tag_names:
            columns.append({"name": name, "type": "group", "values": [
                [t.split(":", 1)[1] for t in g.get("tags") or [] if t.split(":", 1)[0] == name]
                for g in groups]})
        columns.append({"name": "query", "type": "number",
                        "values": [aggregate([value_at(g, t) for t in times], how) for g in groups],
                        "meta": {"unit": None}})
        return {"data": {"type": "scalar_response", "attributes": {"columns": columns}},
                "errors": ""}

    def timeseries(self, query, frm, to, step):
        with LOCK:
            entry = TABLE.get(query)
        groups = groups_of(entry)
        start = -(-frm // step) * step
        times = list(range(start, to, step))
        return {"data": {"type": "timeseries_response", "attributes": {
            "series": [{"group_tags": g.get("tags") or [], "query_index": 0, "unit": None}
                       for g in groups],
            "times": times,
            "values": [[value_at(g, t // 1000) for t in times] for g in groups]}},
            "errors": ""}


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
