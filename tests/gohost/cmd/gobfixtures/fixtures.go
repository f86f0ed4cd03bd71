package main

import (
	"bytes"
	"encoding/gob"
	"net/rpc"
	"os"
	"path/filepath"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/pluginrpc"
)

func fixtures(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := pluginRequests(dir); err != nil {
		return err
	}
	if err := controlRequests(dir); err != nil {
		return err
	}
	return goReplies(dir)
}

// pluginRequests records a controller's calls on one Plugin stream, as net/rpc sends them:
// arguments as interface values holding the registered argument structs, InitPlugin and Type
// with a nil interface.
func pluginRequests(dir string) error {
	r := newRecorder()
	var calls []callJSON
	send := func(method string, args interface{}, expect callJSON) {
		var reply interface{}
		expect.Seq, expect.Method = uint64(len(calls)), method
		calls = append(calls, expect)
		r.send(method, args, &reply)
	}

	run1 := sampleRun("canary-1")
	m1 := pluginMetric("error-rate")
	send("Plugin.InitPlugin", new(interface{}), callJSON{})
	var args interface{} = pluginrpc.RunArgs{AnalysisRun: run1, Metric: m1}
	send("Plugin.Run", &args, callJSON{Run: runOf(run1), Metric: metricOf(m1)})

	run2 := sampleRun("canary-2")
	m2 := pluginMetric("latency")
	m2.Count = nil
	m2.ConsecutiveSuccessLimit = strVal("3")
	args = pluginrpc.RunArgs{AnalysisRun: run2, Metric: m2}
	send("Plugin.Run", &args, callJSON{Run: runOf(run2), Metric: metricOf(m2)})

	inflight := a.Measurement{
		Phase: "Running", Message: "in flight", Value: "",
		StartedAt: at(1_704_164_645, 123_456_789), ResumeAt: at(1_704_164_675, 1),
		Metadata: map[string]string{"query": "up"},
	}
	args = pluginrpc.TerminateAndResumeArgs{AnalysisRun: run1, Metric: m1, Measurement: inflight}
	send("Plugin.Resume", &args, callJSON{Run: runOf(run1), Metric: metricOf(m1), Measurement: measurementOf(inflight)})
	args = pluginrpc.TerminateAndResumeArgs{AnalysisRun: run2, Metric: m2, Measurement: inflight}
	send("Plugin.Terminate", &args, callJSON{Run: runOf(run2), Metric: metricOf(m2), Measurement: measurementOf(inflight)})

	limit := 10
	args = pluginrpc.GarbageCollectArgs{AnalysisRun: run1, Metric: m1, Limit: limit}
	send("Plugin.GarbageCollect", &args, callJSON{Run: runOf(run1), Metric: metricOf(m1), Limit: &limit})
	send("Plugin.Type", new(interface{}), callJSON{})
	args = pluginrpc.GetMetadataArgs{Metric: m1}
	send("Plugin.GetMetadata", &args, callJSON{Metric: metricOf(m1)})
	args = pluginrpc.RunArgs{AnalysisRun: run1, Metric: m1}
	send("Plugin.Nope", &args, callJSON{Error: "rpc: can't find method Plugin.Nope"})

	// A Run without an AnalysisRun (nil pointer: gob omits the field).
	m3 := pluginMetric("no-run")
	args = pluginrpc.RunArgs{Metric: m3}
	send("Plugin.Run", &args, callJSON{Run: runOf(nil), Metric: metricOf(m3)})

	// A Job metric (the deep PodSpec tree) passed as the Run metric itself.
	jm := sampleJobMetric()
	args = pluginrpc.RunArgs{AnalysisRun: run1, Metric: jm}
	send("Plugin.Run", &args, callJSON{Run: runOf(run1), Metric: metricOf(jm)})

	bad := inflight
	bad.Phase = "Pending"
	args = pluginrpc.TerminateAndResumeArgs{AnalysisRun: run1, Metric: m1, Measurement: bad}
	send("Plugin.Resume", &args, callJSON{Error: "unknown measurement phase"})

	if r.err != nil {
		return r.err
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin_requests.bin"), r.conn.Bytes(), 0o644); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "plugin_requests.json"), calls)
}

// controlRequests records the host's calls on the control stream (go-plugin's Control and
// Dispenser services).
func controlRequests(dir string) error {
	r := newRecorder()
	var empty struct{}
	var id uint32
	r.send("Control.Ping", true, &empty)
	r.send("Dispenser.Dispense", pluginrpc.DispenseName, &id)
	r.send("Dispenser.Dispense", "Other", &id)
	r.send("Control.Quit", true, &empty)
	if r.err != nil {
		return r.err
	}
	if err := os.WriteFile(filepath.Join(dir, "control_requests.bin"), r.conn.Bytes(), 0o644); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "control_requests.json"), []callJSON{
		{Seq: 0, Method: "Control.Ping"},
		{Seq: 1, Method: "Dispenser.Dispense"},
		{Seq: 2, Method: "Dispenser.Dispense", Error: "unknown plugin type: Other"},
		{Seq: 3, Method: "Control.Quit"},
	})
}

// goReplies records what a Go plugin (net/rpc server) writes back: rollgate's decoder must
// read Go's own Measurement encoding, including times in other zones (time format version 2,
// with a seconds offset).
func goReplies(dir string) error {
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	var calls []callJSON
	respond := func(seq uint64, method, errStr string, body interface{}, expect callJSON) error {
		if err := enc.Encode(&rpc.Response{ServiceMethod: method, Seq: seq, Error: errStr}); err != nil {
			return err
		}
		if err := enc.Encode(body); err != nil {
			return err
		}
		expect.Seq, expect.Method, expect.Error = seq, method, errStr
		calls = append(calls, expect)
		return nil
	}
	zone := time.FixedZone("odd", 5*3600+30*60+15)
	m := a.Measurement{
		Phase: "Successful", Message: "ok", Value: "[0.97]",
		Metadata:   map[string]string{"q": "sum(up)", "n": "3"},
		StartedAt:  k.NewTimePtr(time.Unix(1_704_164_645, 123_456_789).In(zone)),
		FinishedAt: k.NewTimePtr(time.Unix(1_704_164_646, 0).UTC()),
	}
	if err := respond(1, "Plugin.Run", "", m, callJSON{Measurement: measurementOf(m)}); err != nil {
		return err
	}
	running := a.Measurement{
		Phase:     "Running",
		StartedAt: at(1_704_164_645, 0),
		ResumeAt:  k.NewTimePtr(time.Unix(1_704_164_675, 999_999_999).Local()),
	}
	if err := respond(2, "Plugin.Run", "", running, callJSON{Measurement: measurementOf(running)}); err != nil {
		return err
	}
	// net/rpc's server sends an empty struct body with an error reply.
	if err := respond(3, "Plugin.Nope", "rpc: can't find method Plugin.Nope", struct{}{}, callJSON{}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go_replies.bin"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "go_replies.json"), calls)
}
