package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
)

// loadConfig drives `load` and `rss`.
type loadConfig struct {
	callers  int
	total    int // total Runs over all callers
	specTmpl string
	key      string
	address  string
	ping     bool
	deadline time.Time
	// progress, if set, is called (from one goroutine at a time) after every `every` finished calls.
	every    int
	progress func(done int)
	// successCondition and failureCondition, if set, go on every metric (Argo's conditions).
	successCondition string
	failureCondition string
}

type loadResult struct {
	Callers int `json:"callers"`
	hostkit.Figures
	Phases       map[string]int `json:"phases"`
	RPCErrors    int            `json:"rpcErrors"`
	PingErrors   int            `json:"pingErrors"`
	ErrorPhase   int            `json:"errorPhase"`
	Mismatches   int            `json:"mismatches"`
	ByMetadata   int            `json:"verifiedByMetadata"`
	ByValue      int            `json:"verifiedByValue"`
	TimedOut     bool           `json:"timedOut"`
	FirstProblem string         `json:"firstProblem,omitempty"`
}

// valueHas reports whether n appears in v as a whole number ("7", "[7]", "7.0" but not "17").
func valueHas(v string, n int) bool {
	want := strconv.Itoa(n)
	for _, tok := range strings.FieldsFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		if tok == want || strings.TrimRight(strings.TrimPrefix(tok, want+"."), "0") == "" && strings.HasPrefix(tok, want+".") {
			return true
		}
	}
	return false
}

// runLoad makes cfg.total Runs from cfg.callers goroutines. Every call gets a unique metric name
// and, when the spec contains {{n}}, a unique number; the reply must carry them back
// (Metadata["metric"] when the plugin sets it, the number in Value when the spec used it).
func runLoad(s *session, cfg loadConfig) loadResult {
	res := loadResult{Callers: cfg.callers, Phases: map[string]int{}}
	useN := strings.Contains(cfg.specTmpl, "{{n}}")
	load := hostkit.Load{Callers: cfg.callers, Calls: cfg.total, Deadline: cfg.deadline,
		Every: cfg.every, Progress: cfg.progress}
	out := load.Run(func(w int) hostkit.Worker {
		phases := map[string]int{}
		var rpcErr, pingErr, errPhase, mismatch, byMD, byVal int
		var problem string
		note := func(p string) {
			if problem == "" {
				problem = p
			}
		}
		call := func(i int) time.Duration {
			name := fmt.Sprintf("load-%d-%d", w, i)
			spec := strings.ReplaceAll(cfg.specTmpl, "{{n}}", strconv.Itoa(i))
			metric := pluginMetric(name, cfg.key, specFor(spec, cfg.address))
			metric.SuccessCondition = cfg.successCondition
			metric.FailureCondition = cfg.failureCondition
			run := buildRun(defaultIdentity, metric, time.Now())
			t := time.Now()
			if cfg.ping {
				if err := s.ping(); err != nil {
					pingErr++
					note("ping: " + err.Error())
				}
			}
			m, err := s.rpc.Run(run, metric)
			lat := time.Since(t)
			if err != nil {
				rpcErr++
				note("run: " + err.Error())
				return lat
			}
			phases[string(m.Phase)]++
			if m.Phase == a.AnalysisPhaseError {
				errPhase++
			}
			ok := true
			if v, has := m.Metadata["metric"]; has {
				if v != name {
					ok = false
					note(fmt.Sprintf("call %s got the reply of %s", name, v))
				} else {
					byMD++
				}
			}
			if useN && m.Value != "" {
				if !valueHas(m.Value, i) {
					ok = false
					note(fmt.Sprintf("call %d got value %q", i, m.Value))
				} else {
					byVal++
				}
			}
			if !ok {
				mismatch++
			}
			return lat
		}
		merge := func() {
			for k, v := range phases {
				res.Phases[k] += v
			}
			res.RPCErrors += rpcErr
			res.PingErrors += pingErr
			res.ErrorPhase += errPhase
			res.Mismatches += mismatch
			res.ByMetadata += byMD
			res.ByValue += byVal
			if res.FirstProblem == "" {
				res.FirstProblem = problem
			}
		}
		return hostkit.Worker{Call: call, Merge: merge}
	})
	res.TimedOut = out.TimedOut
	res.Figures = out.Figures()
	return res
}

func cmdLoad(args []string) int {
	fs, c := hostkit.NewCommand(program, "load")
	callers := fs.Int("callers", 30, "concurrent callers (the controller runs 30 analysis workers)")
	runs := fs.Int("runs", 1000, "Runs per caller")
	spec := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} -> -address, {{n}} -> a number unique to the call")
	address := fs.String("address", "", "Prometheus URL for {{address}} (default: a closed port)")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	ping := fs.Bool("ping", true, "Control.Ping before every Run, under one mutex, as the controller does")
	timeout := fs.Duration("timeout", 5*time.Minute, "stop starting calls after this long")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	if *callers < 1 || *runs < 1 {
		return c.SetupErr(fmt.Errorf("-callers and -runs must be positive"))
	}
	addr := *address
	if addr == "" {
		var err error
		if addr, err = closedPortURL(); err != nil {
			return c.SetupErr(err)
		}
	}
	s, err := launch(c)
	if err != nil {
		return c.SetupErr(err)
	}
	defer s.close()
	if r, err := s.rpc.InitPlugin(); err != nil || r.ErrorString != "" {
		return c.SetupErr(fmt.Errorf("InitPlugin: %v %q", err, r.ErrorString))
	}
	res := runLoad(s, loadConfig{callers: *callers, total: *callers * *runs, specTmpl: *spec, key: *key,
		address: addr, ping: *ping, deadline: time.Now().Add(*timeout)})
	c.Emit(res)
	if res.RPCErrors > 0 || res.PingErrors > 0 || res.Mismatches > 0 || res.TimedOut {
		return c.Failf("rpcErrors=%d pingErrors=%d mismatches=%d timedOut=%v; first: %s",
			res.RPCErrors, res.PingErrors, res.Mismatches, res.TimedOut, res.FirstProblem)
	}
	return 0
}
