#!/usr/bin/env python3
"""CloudWatch for rollgate's tests: moto's server (PyPI `moto[server]`, 5.x) in this process on
127.0.0.1, loaded through its own API (PutMetricData, signed by botocore, compression off: moto
5.2 fails gzipped bodies) with the scenarios `tests/support/cloudwatch.rs` documents.

Every series is one datapoint a minute at base + k*60 for k in [-FROM_MIN, TO_MIN), in namespace
Rollgate/Test with the dimension Service (and Track for the compare pairs), so a check at base
over 5m sees exactly five datapoints of each.

Prints `READY <port>` once loaded; stops when stdin closes (its parent test process ends).
"""

import argparse
import datetime
import logging
import sys

import botocore.session
from botocore.config import Config
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

NAMESPACE = "Rollgate/Test"
FROM_MIN = 120
TO_MIN = 60

# name -> per-minute (Requests, Errors, ErrorRate or None for a 0/0 minute)
SERVICES = {
    "healthy": (6000, 6, 0.001),
    "bad": (6000, 300, 0.05),
    "lowtraffic": (3, 0, 0.0),
    "idle": (0, 0, None),
}
# compare pairs: name -> {track: (Requests, Errors) per minute}
PAIRS = {
    "cmp-healthy": {"canary": (600, 6), "stable": (600, 6)},
    "cmp-bad": {"canary": (600, 60), "stable": (600, 6)},
}


# latency pairs (milliseconds, one per minute): the stable side varies between 100 and 120
# (a fixed pseudo-random sequence); the canary is 1.4 times it (lat-shift) or the same (lat-same).
LATENCY = {"lat-shift": 1.4, "lat-same": 1.0}


def stable_latency(k):
    return 100.0 + ((k * 7919) % 21)


def datums(base):
    out = []
    for k in range(-FROM_MIN, TO_MIN):
        t = datetime.datetime.fromtimestamp(base + 60 * k, datetime.timezone.utc)
        for service, factor in LATENCY.items():
            for track, value in (("canary", stable_latency(k) * factor), ("stable", stable_latency(k))):
                dims = [{"Name": "Service", "Value": service}, {"Name": "Track", "Value": track}]
                out.append({"MetricName": "Latency", "Dimensions": dims, "Timestamp": t, "Value": value})
        for service, (req, err, rate) in SERVICES.items():
            dims = [{"Name": "Service", "Value": service}]
            out.append({"MetricName": "Requests", "Dimensions": dims, "Timestamp": t, "Value": float(req)})
            out.append({"MetricName": "Errors", "Dimensions": dims, "Timestamp": t, "Value": float(err)})
            if rate is not None:
                out.append({"MetricName": "ErrorRate", "Dimensions": dims, "Timestamp": t, "Value": rate})
        for service, tracks in PAIRS.items():
            for track, (req, err) in tracks.items():
                dims = [{"Name": "Service", "Value": service}, {"Name": "Track", "Value": track}]
                out.append({"MetricName": "Requests", "Dimensions": dims, "Timestamp": t, "Value": float(req)})
                out.append({"MetricName": "Errors", "Dimensions": dims, "Timestamp": t, "Value": float(err)})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", type=int, required=True)
    args = p.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    client = botocore.session.get_session().create_client(
        "cloudwatch",
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="AKIDSEED",
        aws_secret_access_key="seed-secret",
        config=Config(disable_request_compression=True),
    )
    data = datums(args.base)
    for i in range(0, len(data), 1000):
        client.put_metric_data(Namespace=NAMESPACE, MetricData=data[i : i + 1000])
    print(f"READY {port}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
