package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"rollgate.test/gohost/hostkit"
)

// procStatus reads VmRSS and VmHWM (kB) of a process.
func procStatus(pid int) (rss, hwm int, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.Atoi(fields[0])
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	return rss, hwm, sc.Err()
}

type rssPoint struct {
	Runs    int     `json:"runs"`
	Seconds float64 `json:"seconds"`
	RSSKb   int     `json:"rssKb"`
	HWMKb   int     `json:"hwmKb"`
	FDs     int     `json:"fds"`
}

// openFDs counts the open file descriptors of a process.
func openFDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(entries), err
}

func cmdRSS(args []string) int {
	fs, c := hostkit.NewCommand(program, "rss")
	runs := fs.Int("runs", 100000, "total Runs")
	callers := fs.Int("callers", 30, "concurrent callers")
	points := fs.Int("checkpoints", 10, "number of RSS readings after the first")
	spec := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} -> -address, {{n}} -> a number unique to the call")
	address := fs.String("address", "", "Prometheus URL for {{address}} (default: a closed port)")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	timeout := fs.Duration("timeout", 10*time.Minute, "stop starting calls after this long")
	forDur := fs.Duration("for", 0, "run for this long instead of until -runs (stopping at it is not a failure; -runs stays the upper bound)")
	success := fs.String("success", "", "successCondition of every metric")
	failure := fs.String("failure", "", "failureCondition of every metric")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	if *runs < 1 || *callers < 1 || *points < 1 {
		return c.SetupErr(fmt.Errorf("-runs, -callers and -checkpoints must be positive"))
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
	if s.pid == 0 {
		return c.SetupErr(fmt.Errorf("plugin pid unknown"))
	}
	start := time.Now()
	var pts []rssPoint
	read := func(done int) {
		r, h, err := procStatus(s.pid)
		if err != nil {
			c.Logf("%v", err)
		}
		fds, err := openFDs(s.pid)
		if err != nil {
			c.Logf("%v", err)
		}
		pts = append(pts, rssPoint{Runs: done, Seconds: time.Since(start).Seconds(), RSSKb: r, HWMKb: h, FDs: fds})
	}
	read(0)
	every := *runs / *points
	if every < 1 {
		every = 1
	}
	deadline, timed := time.Now().Add(*timeout), false
	if *forDur > 0 {
		deadline, timed = time.Now().Add(*forDur), true
	}
	res := runLoad(s, loadConfig{callers: *callers, total: *runs, specTmpl: *spec, key: *key, address: addr,
		ping: true, deadline: deadline, every: every, progress: read,
		successCondition: *success, failureCondition: *failure})
	if len(pts) == 0 || pts[len(pts)-1].Runs != res.Calls {
		read(res.Calls)
	}
	out := struct {
		PID         int             `json:"pid"`
		Runs        int             `json:"runs"`
		Callers     int             `json:"callers"`
		CallsPerSec float64         `json:"callsPerSec"`
		RPCErrors   int             `json:"rpcErrors"`
		Mismatches  int             `json:"mismatches"`
		PingErrors  int             `json:"pingErrors"`
		TimedOut    bool            `json:"timedOut"`
		Latency     hostkit.Latency `json:"latencyMs"`
		Phases      map[string]int  `json:"phases"`
		Checkpoints []rssPoint      `json:"checkpoints"`
	}{s.pid, res.Calls, *callers, res.CallsPerSec, res.RPCErrors, res.Mismatches, res.PingErrors, res.TimedOut,
		res.Figures.LatencyMs, res.Phases, pts}
	c.Emit(out)
	if res.RPCErrors > 0 || res.PingErrors > 0 || res.Mismatches > 0 || (res.TimedOut && !timed) {
		return c.Failf("rpcErrors=%d mismatches=%d timedOut=%v; first: %s",
			res.RPCErrors, res.Mismatches, res.TimedOut, res.FirstProblem)
	}
	return 0
}
