package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"strconv"
	"strings"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
)

// The analysis run every call belongs to.
const (
	runName      = "payments-6f7c9d8b5-7-2"
	runNamespace = "payments"
	runUID       = "4c1f5a7e-1b2d-4e8f-9a3c-7d6e5f4a3b21"
)

type loadResult struct {
	Protocol    string `json:"protocol"`
	Concurrency int    `json:"concurrency"`
	hostkit.Figures
	Phases        map[string]int `json:"phases"`
	RPCErrors     int            `json:"rpcErrors"`
	Mismatches    int            `json:"mismatches"`
	PluginCPU     float64        `json:"pluginCpuSeconds"`
	PluginCPUCall float64        `json:"pluginCpuMicrosPerCall"`
	HostCPU       float64        `json:"hostCpuSeconds"`
	TimedOut      bool           `json:"timedOut"`
	FirstProblem  string         `json:"firstProblem,omitempty"`
}

// cpuSeconds reads utime+stime of a process from /proc (clock ticks of 1/100 s).
func cpuSeconds(pid string) (float64, error) {
	raw, err := ioutil.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(raw)
	// The command name may hold spaces; the fields after it are space separated.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%s/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%s/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%s/stat", pid)
	}
	return (utime + stime) / 100, nil
}

// caller makes one Run for call number i and returns the phase and the metric name echoed in
// metadata.
type caller func(ctx context.Context, i int, name string) (phase, echoed string, err error)

func grpcCaller(s *session, ap *api, spec []byte) (caller, error) {
	m, err := ap.method("Run")
	if err != nil {
		return nil, err
	}
	tmpl := fmt.Sprintf(`{"analysis_run":{"name":%q,"namespace":%q,"uid":%q,"labels":{"rollout-type":"Step"}},
		"metric":{"name":"x","interval":"1m","count":5,"spec_json":%q}}`, runName, runNamespace, runUID, string(spec))
	base, err := ap.request(m, tmpl)
	if err != nil {
		return nil, err
	}
	metricField := m.Input().Fields().ByName("metric")
	nameField := metricField.Message().Fields().ByName("name")
	measurementField := m.Output().Fields().ByName("measurement")
	phaseField := measurementField.Message().Fields().ByName("phase")
	metadataField := measurementField.Message().Fields().ByName("metadata")
	path := "/" + serviceName + "/Run"
	return func(ctx context.Context, i int, name string) (string, string, error) {
		req := dynamicpb.NewMessage(m.Input())
		base.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			req.Set(fd, v)
			return true
		})
		metric := dynamicpb.NewMessage(metricField.Message())
		base.Get(metricField).Message().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			metric.Set(fd, v)
			return true
		})
		metric.Set(nameField, protoreflect.ValueOfString(name))
		req.Set(metricField, protoreflect.ValueOfMessage(metric))
		reply := dynamicpb.NewMessage(m.Output())
		if err := s.conn.Invoke(ctx, path, req, reply, forceDyn()); err != nil {
			return "", "", err
		}
		meas := reply.Get(measurementField).Message()
		phase := string(phaseField.Enum().Values().ByNumber(meas.Get(phaseField).Enum()).Name())
		echoed := meas.Get(metadataField).Map().Get(protoreflect.ValueOfString("metric").MapKey()).String()
		return phase, echoed, nil
	}, nil
}

func netrpcCaller(s *session, spec []byte) caller {
	run := &a.AnalysisRun{
		ObjectMeta: k.ObjectMeta{Name: runName, Namespace: runNamespace, UID: k.UID(runUID),
			Labels: map[string]string{"rollout-type": "Step"}},
		Status: a.AnalysisRunStatus{StartedAt: k.NewTimePtr(time.Now().Add(-time.Minute))},
	}
	return func(_ context.Context, i int, name string) (string, string, error) {
		metric := a.Metric{
			Name:     name,
			Interval: "1m",
			Count:    k.IntOrStringPtr(5),
			Provider: a.MetricProvider{Plugin: map[string]json.RawMessage{"rollgate/analysis": json.RawMessage(spec)}},
		}
		m, err := s.rpc.Run(run, metric)
		if err != nil {
			return "", "", err
		}
		return "PHASE_" + strings.ToUpper(string(m.Phase)), m.Metadata["metric"], nil
	}
}

func cmdLoad(args []string) int {
	fs, c := newFlagSet("load")
	protocol := fs.String("protocol", "grpc", "grpc or netrpc")
	concurrency := fs.Int("concurrency", 64, "concurrent callers (gRPC: streams on one connection)")
	total := fs.Int("calls", 10000, "Runs in total")
	warmup := fs.Int("warmup", 500, "Runs before measuring")
	spec := fs.String("spec", "", "plugin config JSON ({{address}} -> -address)")
	address := fs.String("address", "", "Prometheus URL for {{address}}")
	mtls := fs.Bool("mtls", false, "use AutoMTLS (gRPC)")
	timeout := fs.Duration("timeout", 2*time.Minute, "stop starting calls after this long")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	if *concurrency < 1 || *total < 1 || *spec == "" {
		return c.SetupErr(fmt.Errorf("-concurrency and -calls must be positive and -spec given"))
	}
	specBytes := []byte(strings.ReplaceAll(*spec, "{{address}}", *address))
	var s *session
	var call caller
	var err error
	switch *protocol {
	case "grpc":
		ap, lerr := loadAPI(c.descriptor)
		if lerr != nil {
			return c.SetupErr(lerr)
		}
		if s, err = launch(c, []plugin.Protocol{plugin.ProtocolGRPC}, *mtls); err != nil {
			return c.SetupErr(err)
		}
		if call, err = grpcCaller(s, ap, specBytes); err != nil {
			s.client.Kill()
			return c.SetupErr(err)
		}
	case "netrpc":
		if s, err = launch(c, []plugin.Protocol{plugin.ProtocolNetRPC}, false); err != nil {
			return c.SetupErr(err)
		}
		call = netrpcCaller(s, specBytes)
	default:
		return c.SetupErr(fmt.Errorf("-protocol must be grpc or netrpc"))
	}
	defer s.client.Kill()
	res := runLoad(s, call, *protocol, *concurrency, *warmup, *total, time.Now().Add(*timeout))
	c.Emit(res)
	if res.RPCErrors > 0 || res.Mismatches > 0 || res.TimedOut {
		return c.Failf("rpcErrors=%d mismatches=%d timedOut=%v; first: %s",
			res.RPCErrors, res.Mismatches, res.TimedOut, res.FirstProblem)
	}
	return 0
}

// runLoad makes `warmup` unmeasured Runs, then `total` measured ones from `concurrency`
// goroutines; the plugin's CPU time is read around the measured part.
func runLoad(s *session, call caller, protocol string, concurrency, warmup, total int, deadline time.Time) loadResult {
	res := loadResult{Protocol: protocol, Concurrency: concurrency, Phases: map[string]int{}}
	pid := strconv.Itoa(s.pid)
	phase := func(n int, measure bool) hostkit.Outcome {
		load := hostkit.Load{Callers: concurrency, Calls: n, Deadline: deadline}
		return load.Run(func(w int) hostkit.Worker {
			phases := map[string]int{}
			var rpcErr, mismatch int
			var problem string
			one := func(i int) time.Duration {
				name := fmt.Sprintf("load-%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t := time.Now()
				p, echoed, err := call(ctx, i, name)
				lat := time.Since(t)
				cancel()
				switch {
				case err != nil:
					rpcErr++
					if problem == "" {
						problem = err.Error()
					}
				case echoed != name:
					mismatch++
					if problem == "" {
						problem = fmt.Sprintf("call %s got the reply of %q", name, echoed)
					}
				default:
					phases[p]++
				}
				return lat
			}
			merge := func() {
				if !measure {
					return
				}
				for k, v := range phases {
					res.Phases[k] += v
				}
				res.RPCErrors += rpcErr
				res.Mismatches += mismatch
				if res.FirstProblem == "" {
					res.FirstProblem = problem
				}
			}
			return hostkit.Worker{Call: one, Merge: merge}
		})
	}
	phase(warmup, false)
	cpu0, _ := cpuSeconds(pid)
	self0, _ := cpuSeconds("self")
	out := phase(total, true)
	cpu1, err := cpuSeconds(pid)
	self1, _ := cpuSeconds("self")
	if err != nil && res.FirstProblem == "" {
		res.FirstProblem = "reading the plugin's CPU time: " + err.Error()
	}
	res.TimedOut = out.TimedOut
	res.Figures = out.Figures()
	res.PluginCPU = cpu1 - cpu0
	res.HostCPU = self1 - self0
	if n := len(out.Latencies); n > 0 {
		res.PluginCPUCall = res.PluginCPU / float64(n) * 1e6
	}
	return res
}
