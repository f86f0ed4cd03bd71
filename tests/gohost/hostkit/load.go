package hostkit

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Load describes a load run: calls numbered 0 to Calls-1, made by Callers goroutines that each
// take the next number until all are taken or Deadline has passed.
type Load struct {
	Callers  int
	Calls    int
	Deadline time.Time
	// Progress, if set and Every > 0, is called (by one goroutine at a time) after every Every
	// finished calls, with the number finished.
	Every    int
	Progress func(done int)
}

// Worker is one goroutine's part of a load run.
type Worker struct {
	// Call makes call number i and returns its latency (the part of the call that is timed).
	Call func(i int) time.Duration
	// Merge, if set, is called once after the goroutine's last call, under a lock all workers
	// share, to add the worker's own counts to the run's result.
	Merge func()
}

// Outcome is what a load run measured.
type Outcome struct {
	// Latencies holds the latency of every call made (sorted by Figures).
	Latencies []time.Duration
	// Elapsed is the wall time from the start of the first goroutine to the end of the last.
	Elapsed time.Duration
	// TimedOut is set when a goroutine stopped at the deadline.
	TimedOut bool
}

// Run makes the load run; newWorker(w) is called on goroutine w (0 to Callers-1) before its
// first call.
func (l Load) Run(newWorker func(w int) Worker) Outcome {
	var next int64 = -1
	var mu sync.Mutex
	var out Outcome
	var done int
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < l.Callers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			worker := newWorker(w)
			var lat []time.Duration
			timedOut := false
			for {
				i := int(atomic.AddInt64(&next, 1))
				if i >= l.Calls {
					break
				}
				if time.Now().After(l.Deadline) {
					timedOut = true
					break
				}
				lat = append(lat, worker.Call(i))
				if l.Progress != nil && l.Every > 0 {
					mu.Lock()
					done++
					if done%l.Every == 0 {
						l.Progress(done)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			out.Latencies = append(out.Latencies, lat...)
			out.TimedOut = out.TimedOut || timedOut
			if worker.Merge != nil {
				worker.Merge()
			}
		}(w)
	}
	wg.Wait()
	out.Elapsed = time.Since(start)
	return out
}

// Latency is the `latencyMs` object of a load result: percentiles of the call latencies in
// milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Figures are the throughput and latency fields of a load result; embedded in a result struct,
// they print as its "calls", "seconds", "callsPerSec" and "latencyMs" fields.
type Figures struct {
	Calls       int     `json:"calls"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"callsPerSec"`
	LatencyMs   Latency `json:"latencyMs"`
}

// Figures sorts o.Latencies and returns the run's figures: calls made, seconds, calls per second
// (0 if no time elapsed) and the p50/p90/p99/max latency (nearest rank; all 0 without calls).
func (o *Outcome) Figures() Figures {
	all := o.Latencies
	f := Figures{Calls: len(all), Seconds: o.Elapsed.Seconds()}
	if o.Elapsed > 0 {
		f.CallsPerSec = float64(len(all)) / o.Elapsed.Seconds()
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
		return Ms(all[idx])
	}
	f.LatencyMs = Latency{P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: pct(1)}
	return f
}
