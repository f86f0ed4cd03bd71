package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	a "rollgate.test/gohost/argotypes/v1alpha1"
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
}

type latencies struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type loadResult struct {
	Callers      int            `json:"callers"`
	Calls        int            `json:"calls"`
	Seconds      float64        `json:"seconds"`
	CallsPerSec  float64        `json:"callsPerSec"`
	LatencyMs    latencies      `json:"latencyMs"`
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
	var next int64 = -1
	var mu sync.Mutex
	var all []time.Duration
	var done int
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.callers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var lat []time.Duration
			phases := map[string]int{}
			var rpcErr, pingErr, errPhase, mismatch, byMD, byVal int
			var problem string
			note := func(p string) {
				if problem == "" {
					problem = p
				}
			}
			timedOut := false
			for {
				i := int(atomic.AddInt64(&next, 1))
				if i >= cfg.total {
					break
				}
				if time.Now().After(cfg.deadline) {
					timedOut = true
					break
				}
				name := fmt.Sprintf("load-%d-%d", w, i)
				spec := strings.ReplaceAll(cfg.specTmpl, "{{n}}", strconv.Itoa(i))
				metric := pluginMetric(name, cfg.key, specFor(spec, cfg.address))
				run := buildRun(defaultIdentity, metric, time.Now())
				t := time.Now()
				if cfg.ping {
					if err := s.ping(); err != nil {
						pingErr++
						note("ping: " + err.Error())
					}
				}
				m, err := s.rpc.Run(run, metric)
				lat = append(lat, time.Since(t))
				if err != nil {
					rpcErr++
					note("run: " + err.Error())
				} else {
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
				}
				if cfg.progress != nil && cfg.every > 0 {
					mu.Lock()
					done++
					if done%cfg.every == 0 {
						cfg.progress(done)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			for k, v := range phases {
				res.Phases[k] += v
			}
			res.RPCErrors += rpcErr
			res.PingErrors += pingErr
			res.ErrorPhase += errPhase
			res.Mismatches += mismatch
			res.ByMetadata += byMD
			res.ByValue += byVal
			res.TimedOut = res.TimedOut || timedOut
			if res.FirstProblem == "" {
				res.FirstProblem = problem
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	res.Calls = len(all)
	res.Seconds = el.Seconds()
	if el > 0 {
		res.CallsPerSec = float64(len(all)) / el.Seconds()
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		idx := int(p*float64(len(all))+0.5) - 1
		if idx < 0 {
			idx = 0
		}
		if idx >= len(all) {
			idx = len(all) - 1
		}
		return ms(all[idx])
	}
	res.LatencyMs = latencies{P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: pct(1)}
	return res
}

func cmdLoad(args []string) int {
	fs, c := newFlagSet("load")
	callers := fs.Int("callers", 30, "concurrent callers (the controller runs 30 analysis workers)")
	runs := fs.Int("runs", 1000, "Runs per caller")
	spec := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} -> -address, {{n}} -> a number unique to the call")
	address := fs.String("address", "", "Prometheus URL for {{address}} (default: a closed port)")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	ping := fs.Bool("ping", true, "Control.Ping before every Run, under one mutex, as the controller does")
	timeout := fs.Duration("timeout", 5*time.Minute, "stop starting calls after this long")
	if !c.parse(fs, args) {
		return exitSetup
	}
	if *callers < 1 || *runs < 1 {
		return setupErr("load", fmt.Errorf("-callers and -runs must be positive"))
	}
	addr := *address
	if addr == "" {
		var err error
		if addr, err = closedPortURL(); err != nil {
			return setupErr("load", err)
		}
	}
	s, err := launch(c)
	if err != nil {
		return setupErr("load", err)
	}
	defer s.close()
	if r, err := s.rpc.InitPlugin(); err != nil || r.ErrorString != "" {
		return setupErr("load", fmt.Errorf("InitPlugin: %v %q", err, r.ErrorString))
	}
	res := runLoad(s, loadConfig{callers: *callers, total: *callers * *runs, specTmpl: *spec, key: *key,
		address: addr, ping: *ping, deadline: time.Now().Add(*timeout)})
	emit(res)
	if res.RPCErrors > 0 || res.PingErrors > 0 || res.Mismatches > 0 || res.TimedOut {
		fmt.Fprintf(os.Stderr, "gohost load: rpcErrors=%d pingErrors=%d mismatches=%d timedOut=%v; first: %s\n",
			res.RPCErrors, res.PingErrors, res.Mismatches, res.TimedOut, res.FirstProblem)
		return exitFail
	}
	return 0
}
