#!/usr/bin/env python3
"""A client of rollgate's gRPC endpoint not written in Rust, for tests/it/grpc_remote.rs.

Generates Python stubs with grpcio-tools from proto/ (and the minimal health and reflection
protos in proto/grpcmin next to this file; not under grpc/, which would shadow grpcio) into a temporary directory, calls the server, and prints one JSON
object: {"cases": [{"case", "code", "message", "response", "elapsedMs"}, ...]}. It asserts
nothing itself: the Rust test checks every case.

usage: client.py --addr HOST:PORT --proto-root DIR --prom URL --hang URL [--token T]
                 [--tls-ca PEM] [--suite full|tls]
"""

import argparse
import importlib
import json
import os
import sys
import tempfile
import time


def generate(proto_root, out):
    """Compiles the protos into `out` and makes them importable."""
    from grpc_tools import protoc
    import grpc_tools

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = [
        "rollgate/v1/metric_provider.proto",
        "grpcmin/health_v1.proto",
        "grpcmin/reflection_v1.proto",
        "grpcmin/reflection_v1alpha.proto",
    ]
    for f in files:
        code = protoc.main([
            "protoc", "-I" + proto_root, "-I" + here, "-I" + well_known,
            "--python_out=" + out, "--grpc_python_out=" + out, f,
        ])
        if code != 0:
            raise SystemExit("protoc failed for " + f)
    sys.path.insert(0, out)


def load(name):
    return importlib.import_module(name)


class Runner:
    def __init__(self, args):
        import grpc

        self.grpc = grpc
        self.args = args
        self.cases = []
        self.pb = load("rollgate.v1.metric_provider_pb2")
        svc = load("rollgate.v1.metric_provider_pb2_grpc")
        self.health_pb = load("grpcmin.health_v1_pb2")
        health_svc = load("grpcmin.health_v1_pb2_grpc")
        options = [("grpc.max_send_message_length", 64 * 1024 * 1024),
                   ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        if args.tls_ca:
            with open(args.tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self.channel = grpc.secure_channel(args.addr, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(args.addr, options=options)
        self.stub = svc.MetricProviderServiceStub(self.channel)
        self.health = health_svc.HealthStub(self.channel)
        self.auth = [("authorization", "Bearer " + args.token)] if args.token else []

    def record(self, case, fn, to_dict=True):
        """Runs fn(); records the status code, message and reply (as a dict)."""
        from google.protobuf.json_format import MessageToDict

        start = time.monotonic()
        entry = {"case": case, "code": "OK", "message": "", "response": None}
        try:
            reply = fn()
            if isinstance(reply, bytes):
                entry["response"] = reply.hex()
            elif reply is not None:
                entry["response"] = (MessageToDict(reply, preserving_proto_field_name=True)
                                     if to_dict else reply)
        except self.grpc.RpcError as e:
            entry["code"] = e.code().name
            entry["message"] = e.details() or ""
        except Exception as e:  # a client-side problem: report it, do not hide it
            entry["code"] = "CLIENT_ERROR"
            entry["message"] = "%s: %s" % (type(e).__name__, e)
        entry["elapsedMs"] = round((time.monotonic() - start) * 1000, 1)
        self.cases.append(entry)

    def spec(self, address, query="vector(1)", **extra):
        s = {"prometheus": {"address": address, "timeout": "60s", "retries": 0},
             "query": query, "noData": "inconclusive"}
        s["prometheus"].update(extra)
        return json.dumps(s)

    def metric(self, name, spec, success=""):
        return self.pb.Metric(name=name, interval="1m", count=5, success_condition=success,
                              spec_json=spec)

    def reflection(self, version, request_fields):
        """One request on a reflection stream; returns the reply as a dict."""
        pb = load("grpcmin.reflection_%s_pb2" % version)
        svc = load("grpcmin.reflection_%s_pb2_grpc" % version)
        stub = svc.ServerReflectionStub(self.channel)
        replies = stub.ServerReflectionInfo(
            iter([pb.ServerReflectionRequest(**request_fields)]), metadata=self.auth, timeout=10)
        return list(replies)

    def full(self):
        pb, a = self.pb, self.args
        good = self.spec(a.prom, "sum(rate(http_requests_total[5m]))")
        run = pb.AnalysisRun(name="payments-7-2", namespace="payments", uid="4c1f",
                             labels={"rollout-type": "Step"})
        H = self.health_pb.HealthCheckRequest

        # Health needs no token; everything else does.
        self.record("health", lambda: self.health.Check(H(service=""), timeout=10))
        self.record("health_service", lambda: self.health.Check(
            H(service="rollgate.v1.MetricProviderService"), timeout=10))
        self.record("health_unknown", lambda: self.health.Check(H(service="nope"), timeout=10))

        for version in ("v1", "v1alpha"):
            def listing(version=version):
                replies = self.reflection(version, {"list_services": ""})
                return sorted(s.name for r in replies for s in r.list_services_response.service)
            self.record("reflection_list_" + version, listing, to_dict=False)

        def describe():
            from google.protobuf import descriptor_pb2
            replies = self.reflection("v1", {"file_containing_symbol": "rollgate.v1.MetricProviderService"})
            out = []
            for r in replies:
                for raw in r.file_descriptor_response.file_descriptor_proto:
                    fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
                    out.append({"name": fd.name, "package": fd.package,
                                "services": {s.name: [m.name for m in s.method] for s in fd.service}})
            return out
        self.record("reflection_describe", describe, to_dict=False)

        def no_token_reflection():
            pbr = load("grpcmin.reflection_v1_pb2")
            svc = load("grpcmin.reflection_v1_pb2_grpc")
            stub = svc.ServerReflectionStub(self.channel)
            return list(stub.ServerReflectionInfo(
                iter([pbr.ServerReflectionRequest(list_services="")]), timeout=10))
        self.record("reflection_no_token", no_token_reflection, to_dict=False)
        self.record("run_no_token", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("m", good)), timeout=10))
        self.record("type_wrong_token", lambda: self.stub.Type(
            pb.TypeRequest(), metadata=[("authorization", "Bearer wrong-" + a.token)], timeout=10))

        md = self.auth
        self.record("init_plugin", lambda: self.stub.InitPlugin(pb.InitPluginRequest(), metadata=md, timeout=10))
        self.record("type", lambda: self.stub.Type(pb.TypeRequest(), metadata=md, timeout=10))
        self.record("get_metadata", lambda: self.stub.GetMetadata(
            pb.GetMetadataRequest(metric=self.metric("m", good)), metadata=md, timeout=10))
        self.record("run_successful", lambda: self.stub.Run(
            pb.RunRequest(analysis_run=run, metric=self.metric("error-rate", good, "result[0] < 0.01")),
            metadata=md, timeout=10))
        self.record("run_failed", lambda: self.stub.Run(
            pb.RunRequest(analysis_run=run, metric=self.metric("error-rate", good, "result[0] < 0.001")),
            metadata=md, timeout=10))
        started = pb.Measurement().started_at.__class__(seconds=1767323045, nanos=123456789)
        in_flight = pb.Measurement(phase=pb.PHASE_RUNNING, message="waiting for traffic",
                                   started_at=started)
        self.record("resume", lambda: self.stub.Resume(
            pb.ResumeRequest(analysis_run=run, metric=self.metric("error-rate", good, "result[0] < 0.01"),
                             measurement=in_flight), metadata=md, timeout=10))
        self.record("terminate", lambda: self.stub.Terminate(
            pb.TerminateRequest(measurement=in_flight), metadata=md, timeout=10))
        self.record("garbage_collect", lambda: self.stub.GarbageCollect(
            pb.GarbageCollectRequest(analysis_run=run, limit=10), metadata=md, timeout=10))
        at = pb.Measurement().started_at.__class__(seconds=1767323045)
        self.record("analyze", lambda: self.stub.Analyze(
            pb.AnalyzeRequest(metric=self.metric("adhoc", self.spec(a.prom, "sum(rate(http_requests_total[{{args.w}}]))"),
                                                 "result[0] < {{args.max}}"),
                              args={"w": "5m", "max": "0.01"},
                              evaluation_time=at), metadata=md, timeout=10))

        # Bad input: clear status codes, and the server keeps serving.
        self.record("run_missing_metric", lambda: self.stub.Run(pb.RunRequest(), metadata=md, timeout=10))
        self.record("run_missing_spec", lambda: self.stub.Run(
            pb.RunRequest(metric=pb.Metric(name="m")), metadata=md, timeout=10))
        self.record("run_invalid_json", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("m", '{"query": "up", ')), metadata=md, timeout=10))
        self.record("run_invalid_spec", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("m", json.dumps({"query": "up", "noData": "maybe"}))),
            metadata=md, timeout=10))
        self.record("resume_unknown_phase", lambda: self.stub.Resume(
            pb.ResumeRequest(metric=self.metric("m", good),
                             measurement=pb.Measurement(phase=99, started_at=started)),
            metadata=md, timeout=10))
        self.record("resume_unset_phase", lambda: self.stub.Resume(
            pb.ResumeRequest(metric=self.metric("m", good), measurement=pb.Measurement(started_at=started)),
            metadata=md, timeout=10))
        self.record("terminate_missing_measurement", lambda: self.stub.Terminate(
            pb.TerminateRequest(), metadata=md, timeout=10))
        bad_time = pb.Measurement().started_at.__class__(seconds=10 ** 12)
        self.record("analyze_time_out_of_range", lambda: self.stub.Analyze(
            pb.AnalyzeRequest(metric=self.metric("m", good), evaluation_time=bad_time),
            metadata=md, timeout=10))
        self.record("run_server_file", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("m", self.spec(a.prom, bearerTokenFile="/etc/hostname"))),
            metadata=md, timeout=10))
        huge = pb.RunRequest(metric=self.metric("m", " " * (10 * 1024 * 1024) + good))
        self.record("run_10mb", lambda: self.stub.Run(huge, metadata=md, timeout=30))
        garbage = self.channel.unary_unary("/rollgate.v1.MetricProviderService/Run",
                                           request_serializer=lambda b: b,
                                           response_deserializer=lambda b: b)
        self.record("run_garbage_bytes", lambda: garbage(b"\xff\xff\xff\xff\x0f", metadata=md, timeout=10),
                    to_dict=False)
        self.record("unknown_method", lambda: self.channel.unary_unary(
            "/rollgate.v1.MetricProviderService/Nope", request_serializer=lambda b: b,
            response_deserializer=lambda b: b)(b"", metadata=md, timeout=10), to_dict=False)
        self.record("type_after_bad_input", lambda: self.stub.Type(pb.TypeRequest(), metadata=md, timeout=10))

        # Deadlines: the call's deadline ends it; the server's budget bounds a call without one.
        hang = self.spec(a.hang, "vector(1)")
        self.record("run_deadline", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("slow", hang)), metadata=md, timeout=0.5))
        self.record("run_budget", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("slow", hang)), metadata=md))
        self.record("type_after_deadlines", lambda: self.stub.Type(pb.TypeRequest(), metadata=md, timeout=10))

    def tls(self):
        pb, a = self.pb, self.args
        H = self.health_pb.HealthCheckRequest
        self.record("health", lambda: self.health.Check(H(service=""), timeout=10))
        self.record("run_successful", lambda: self.stub.Run(
            pb.RunRequest(metric=self.metric("error-rate", self.spec(a.prom, "vector(1)"), "result[0] < 0.01")),
            metadata=self.auth, timeout=10))
        import grpc
        plain = grpc.insecure_channel(a.addr)
        health_svc = load("grpcmin.health_v1_pb2_grpc")
        self.record("plaintext_refused", lambda: health_svc.HealthStub(plain).Check(H(service=""), timeout=5))


    def serve(self):
        """`rollgate serve --grpc-listen`: health, a Run with the token, one without it, an Analyze."""
        pb, a = self.pb, self.args
        H = self.health_pb.HealthCheckRequest
        self.record("health", lambda: self.health.Check(H(service=""), timeout=10))
        req = pb.RunRequest(metric=self.metric("error-rate", self.spec(a.prom, "vector(1)"), "result[0] < 0.01"))
        self.record("run_successful", lambda: self.stub.Run(req, metadata=self.auth, timeout=10))
        self.record("run_without_token", lambda: self.stub.Run(req, timeout=10))
        self.record("analyze", lambda: self.stub.Analyze(pb.AnalyzeRequest(
            metric=self.metric("adhoc", self.spec(a.prom, "vector(1)"), "result[0] == 1")),
            metadata=self.auth, timeout=10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--addr", required=True)
    p.add_argument("--proto-root", required=True)
    p.add_argument("--prom", required=True)
    p.add_argument("--hang", default="")
    p.add_argument("--token", default="")
    p.add_argument("--tls-ca", default="")
    p.add_argument("--suite", choices=["full", "tls", "serve"], default="full")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="rollgate-grpc-py-") as out:
        generate(args.proto_root, out)
        r = Runner(args)
        getattr(r, args.suite)()
        print(json.dumps({"cases": r.cases}))


if __name__ == "__main__":
    main()
