package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
	"rollgate.test/gohost/pluginrpc"
)

type callsFile struct {
	Run   *runIdentity `json:"run"`
	Calls []callSpec   `json:"calls"`
}

type callSpec struct {
	Method      string           `json:"method"`
	Metric      jsonMetric       `json:"metric"`
	Measurement *jsonMeasurement `json:"measurement"`
	Limit       int              `json:"limit"`
	Run         *runIdentity     `json:"run"`
	History     *jsonHistory     `json:"history"`
}

// jsonHistory replaces the metric under test's status.metricResults entry (default: three
// Successful measurements), as the controller would hold it after that many measurements.
type jsonHistory struct {
	// Completed Successful measurements (each counted in Count, as analysis.go does).
	Completed int `json:"completed"`
	// Error measurements after them (counted in Error, not in Count).
	Errors int `json:"errors"`
	// Keep only the newest Listed measurements, as garbageCollectMeasurements trims them;
	// nil keeps all.
	Listed *int `json:"listed"`
}

// withHistory sets the target metric's (the first) result in run to h.
func withHistory(run *a.AnalysisRun, h jsonHistory) {
	results := run.Status.MetricResults
	if h.Completed == 0 && h.Errors == 0 {
		// Argo adds a metric's result with its first measurement.
		run.Status.MetricResults = results[1:]
		return
	}
	r := metricResult(results[0].Name, run.Status.StartedAt.Time, h.Completed, false)
	for i := 0; i < h.Errors; i++ {
		s := run.Status.StartedAt.Time.Add(time.Duration(h.Completed+i) * time.Minute)
		r.Measurements = append(r.Measurements, a.Measurement{
			Phase:      a.AnalysisPhaseError,
			Message:    "connection refused",
			StartedAt:  k.NewTimePtr(s),
			FinishedAt: k.NewTimePtr(s.Add(time.Second)),
		})
		r.Error++
		r.ConsecutiveError++
		r.ConsecutiveSuccess = 0
	}
	if h.Listed != nil && *h.Listed < len(r.Measurements) {
		r.Measurements = r.Measurements[len(r.Measurements)-*h.Listed:]
	}
	results[0] = r
}

// callResult is one output line of `calls`; only the fields that belong to the method are set.
type callResult struct {
	Index       int                `json:"index"`
	Method      string             `json:"method"`
	ElapsedMs   float64            `json:"elapsedMs"`
	RPCError    *string            `json:"rpcError"`
	Measurement *jsonMeasurement   `json:"measurement,omitempty"`
	Error       *string            `json:"error,omitempty"`
	Type        *string            `json:"type,omitempty"`
	Metadata    *map[string]string `json:"metadata,omitempty"`
}

func readCallsFile(path string) (callsFile, error) {
	var f callsFile
	b, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &f.Calls)
	} else {
		err = json.Unmarshal(b, &f)
	}
	return f, err
}

func cmdCalls(args []string) int {
	fs, c := hostkit.NewCommand(program, "calls")
	file := fs.String("calls", "", "JSON file: {\"run\":{name,namespace,uid}?, \"calls\":[...]} or a bare list of calls")
	timeout := fs.Duration("call-timeout", time.Minute, "give up on a call after this long (rpcError says so)")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	f, err := readCallsFile(*file)
	if err != nil {
		return c.SetupErr(fmt.Errorf("reading %s: %w", *file, err))
	}
	s, err := launch(c)
	if err != nil {
		return c.SetupErr(err)
	}
	defer s.close()
	for i, call := range f.Calls {
		id := defaultIdentity
		if f.Run != nil {
			id = *f.Run
		}
		if call.Run != nil {
			id = *call.Run
		}
		type outcome struct {
			res callResult
			err error
		}
		ch := make(chan outcome, 1)
		go func() {
			res, err := doCall(s, call, id)
			ch <- outcome{res, err}
		}()
		var res callResult
		select {
		case o := <-ch:
			res, err = o.res, o.err
		case <-time.After(*timeout):
			msg := fmt.Sprintf("no reply within %s", *timeout)
			res = callResult{Method: call.Method, ElapsedMs: hostkit.Ms(*timeout), RPCError: &msg}
		}
		if err != nil {
			return c.SetupErr(fmt.Errorf("call %d: %w", i, err))
		}
		res.Index = i
		c.Emit(res)
	}
	return 0
}

func errPtr(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

func strOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func doCall(s *session, call callSpec, id runIdentity) (callResult, error) {
	res := callResult{Method: call.Method}
	metric := call.Metric.metric()
	run := buildRun(id, metric, time.Now())
	if call.History != nil {
		withHistory(run, *call.History)
	}
	var meas a.Measurement
	if call.Measurement != nil {
		var err error
		if meas, err = fromJSONMeasurement(*call.Measurement); err != nil {
			return res, fmt.Errorf("measurement: %w", err)
		}
	}
	start := time.Now()
	var err error
	switch call.Method {
	case "Ping":
		err = s.ping()
	case "InitPlugin":
		var r pluginrpc.RpcError
		r, err = s.rpc.InitPlugin()
		res.Error = &r.ErrorString
	case "Type":
		var t string
		t, err = s.rpc.Type()
		res.Type = &t
	case "GetMetadata":
		var md map[string]string
		md, err = s.rpc.GetMetadata(metric)
		res.Metadata = &md
	case "GarbageCollect":
		var r pluginrpc.RpcError
		r, err = s.rpc.GarbageCollect(run, metric, call.Limit)
		res.Error = &r.ErrorString
	case "Run", "Resume", "Terminate":
		// The controller pings before handing out the plugin for every measurement.
		if err = s.ping(); err != nil {
			break
		}
		var m a.Measurement
		switch call.Method {
		case "Run":
			m, err = s.rpc.Run(run, metric)
		case "Resume":
			m, err = s.rpc.Resume(run, metric, meas)
		default:
			m, err = s.rpc.Terminate(run, metric, meas)
		}
		jm := toJSONMeasurement(m)
		res.Measurement = &jm
	default:
		return res, fmt.Errorf("unknown method %q (Ping|InitPlugin|Type|GetMetadata|GarbageCollect|Run|Resume|Terminate)", call.Method)
	}
	res.ElapsedMs = hostkit.Ms(time.Since(start))
	res.RPCError = errPtr(err)
	return res, nil
}
