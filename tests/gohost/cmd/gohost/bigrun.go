package main

import (
	"bytes"
	"encoding/gob"
	"time"

	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
	"rollgate.test/gohost/pluginrpc"
)

func gobSize(run *a.AnalysisRun) int {
	var b bytes.Buffer
	var v interface{} = pluginrpc.RunArgs{AnalysisRun: run}
	if err := gob.NewEncoder(&b).Encode(&v); err != nil {
		return 0
	}
	return b.Len()
}

func cmdBigrun(args []string) int {
	fs, c := hostkit.NewCommand(program, "bigrun")
	mb := fs.Float64("mb", 5, "size of the AnalysisRun on the wire, in MiB")
	spec := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} -> -address")
	address := fs.String("address", "", "Prometheus URL for {{address}} (default: a closed port)")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	addr := *address
	if addr == "" {
		var err error
		if addr, err = closedPortURL(); err != nil {
			return c.SetupErr(err)
		}
	}
	metric := pluginMetric("big-run", *key, specFor(*spec, addr))
	run := buildRun(defaultIdentity, metric, time.Now())
	size := padRun(run, int(*mb*(1<<20)), gobSize)

	s, err := launch(c)
	if err != nil {
		return c.SetupErr(err)
	}
	defer s.close()
	type reply struct {
		ElapsedMs   float64          `json:"elapsedMs"`
		RPCError    *string          `json:"rpcError"`
		Measurement *jsonMeasurement `json:"measurement"`
	}
	call := func(r *a.AnalysisRun, m a.Metric) reply {
		t := time.Now()
		meas, err := s.rpc.Run(r, m)
		jm := toJSONMeasurement(meas)
		return reply{hostkit.Ms(time.Since(t)), errPtr(err), &jm}
	}
	big := call(run, metric)
	small := pluginMetric("after-big-run", *key, specFor(*spec, addr))
	after := call(buildRun(defaultIdentity, small, time.Now()), small)
	out := struct {
		Bytes        int   `json:"bytes"`
		Measurements int   `json:"measurements"`
		Annotations  int   `json:"annotations"`
		Big          reply `json:"big"`
		After        reply `json:"after"`
		OK           bool  `json:"ok"`
	}{size, len(run.Status.MetricResults[0].Measurements), len(run.Annotations), big, after,
		big.RPCError == nil && after.RPCError == nil && big.Measurement.Phase != "" && after.Measurement.Phase != ""}
	c.Emit(out)
	if !out.OK {
		return c.Failf("big: rpc error %q phase %q; after: rpc error %q phase %q",
			strOr(big.RPCError), big.Measurement.Phase, strOr(after.RPCError), after.Measurement.Phase)
	}
	return 0
}
