package main

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
)

type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

type checklist struct {
	Checks []check `json:"checks"`
}

func (c *checklist) add(name string, ok bool, detail string, args ...interface{}) bool {
	d := fmt.Sprintf(detail, args...)
	if ok && d == "<nil>" {
		d = ""
	}
	c.Checks = append(c.Checks, check{Name: name, OK: ok, Detail: d})
	return ok
}

func (c *checklist) failed() []string {
	var out []string
	for _, ch := range c.Checks {
		if !ch.OK {
			out = append(out, ch.Name+": "+ch.Detail)
		}
	}
	return out
}

// closedPortURL returns an http URL on 127.0.0.1 where nothing listens.
func closedPortURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr, nil
}

const defaultSpec = `{"prometheus":{"address":"{{address}}","timeout":"2s"},"query":"vector(1)","noData":"error"}`

// specFor fills the {{address}} placeholder.
func specFor(tmpl, address string) []byte {
	return []byte(strings.ReplaceAll(tmpl, "{{address}}", address))
}

// saneTimes checks that a finished measurement's times lie within the call (with slack for
// clocks read in two processes).
func saneTimes(m a.Measurement, before, after time.Time) string {
	if m.StartedAt == nil || m.FinishedAt == nil {
		return fmt.Sprintf("startedAt=%q finishedAt=%q, both must be set", strOr(fmtTime(m.StartedAt)), strOr(fmtTime(m.FinishedAt)))
	}
	slack := time.Second
	s, f := m.StartedAt.Time, m.FinishedAt.Time
	switch {
	case f.Before(s):
		return fmt.Sprintf("finishedAt %s before startedAt %s", f, s)
	case s.Before(before.Add(-slack)) || f.After(after.Add(slack)):
		return fmt.Sprintf("times %s..%s outside the call %s..%s", s, f, before, after)
	}
	return ""
}

func cmdProtocol(args []string) int {
	fs, c := hostkit.NewCommand(program, "protocol")
	specTmpl := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} is replaced by a closed-port URL")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	addr, err := closedPortURL()
	if err != nil {
		return c.SetupErr(err)
	}
	var cl checklist
	out := struct {
		OK     bool    `json:"ok"`
		Plugin string  `json:"plugin"`
		Type   string  `json:"type"`
		Checks []check `json:"checks"`
	}{Plugin: c.Plugin}
	finish := func() int {
		out.Checks = cl.Checks
		failed := cl.failed()
		out.OK = len(failed) == 0
		c.Emit(out)
		if !out.OK {
			return c.Failf("%d check(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
		}
		return 0
	}
	s, err := launch(c)
	if !cl.add("start", err == nil, "%v", err) {
		return finish()
	}
	defer s.close()
	metric := pluginMetric("error-rate", *key, specFor(*specTmpl, addr))
	now := time.Now()
	run := buildRun(defaultIdentity, metric, now)

	err = s.ping()
	cl.add("Control.Ping", err == nil, "%v", err)

	rerr, err := s.rpc.InitPlugin()
	cl.add("Plugin.InitPlugin", err == nil && rerr.ErrorString == "", "rpc error %v, ErrorString %q", err, rerr.ErrorString)

	typ, err := s.rpc.Type()
	out.Type = typ
	cl.add("Plugin.Type", err == nil && typ != "", "rpc error %v, type %q", err, typ)

	md, err := s.rpc.GetMetadata(metric)
	cl.add("Plugin.GetMetadata", err == nil && md["error"] == "", "rpc error %v, metadata %v", err, md)

	before := time.Now()
	m, err := s.rpc.Run(run, metric)
	after := time.Now()
	switch {
	case err != nil:
		cl.add("Plugin.Run closed port", false, "rpc error %v", err)
	case m.Phase != a.AnalysisPhaseError || m.Message == "":
		cl.add("Plugin.Run closed port", false, "want phase Error with a message, got %q %q", m.Phase, m.Message)
	default:
		bad := saneTimes(m, before, after)
		cl.add("Plugin.Run closed port", bad == "", "%s", bad)
	}

	// An in-flight measurement as the controller holds it: local zone, nanoseconds, no
	// FinishedAt, ResumeAt in the past.
	zone := time.FixedZone("", 2*3600)
	t0 := time.Now().Add(-30 * time.Second).Truncate(time.Second).Add(123456789 * time.Nanosecond).In(zone)
	inflight := a.Measurement{
		Phase:     a.AnalysisPhaseRunning,
		StartedAt: k.NewTimePtr(t0),
		ResumeAt:  k.NewTimePtr(t0.Add(20*time.Second + 987654321*time.Nanosecond)),
		Metadata:  map[string]string{"gohost": "in-flight"},
	}
	for _, method := range []string{"Resume", "Terminate"} {
		var m a.Measurement
		if method == "Resume" {
			m, err = s.rpc.Resume(run, metric, inflight)
		} else {
			m, err = s.rpc.Terminate(run, metric, inflight)
		}
		name := "Plugin." + method + " in-flight"
		switch {
		case err != nil:
			cl.add(name, false, "rpc error %v", err)
		case m.Phase == "":
			cl.add(name, false, "empty phase")
		case m.StartedAt == nil || !m.StartedAt.Equal(t0):
			cl.add(name, false, "startedAt %q, want %s (to the nanosecond)", strOr(fmtTime(m.StartedAt)), t0.Format(time.RFC3339Nano))
		default:
			cl.add(name, true, "phase %s, startedAt %s", m.Phase, *fmtTime(m.StartedAt))
		}
	}

	gc, err := s.rpc.GarbageCollect(run, metric, 10)
	cl.add("Plugin.GarbageCollect", err == nil && gc.ErrorString == "", "rpc error %v, ErrorString %q", err, gc.ErrorString)

	// Concurrent calls on the one stream, as the controller's 30 workers make them.
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			mt := pluginMetric(fmt.Sprintf("concurrent-%d", i), *key, specFor(*specTmpl, addr))
			m, err := s.rpc.Run(buildRun(defaultIdentity, mt, time.Now()), mt)
			if err != nil || m.Phase == "" {
				errs <- fmt.Sprintf("call %d: rpc error %v phase %q", i, err, m.Phase)
			} else if v, ok := m.Metadata["metric"]; ok && v != mt.Name {
				errs <- fmt.Sprintf("call %d: reply for metric %q", i, v)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	var bad []string
	for e := range errs {
		bad = append(bad, e)
	}
	cl.add("16 concurrent Plugin.Run", len(bad) == 0, "%s", strings.Join(bad, "; "))

	err = s.ping()
	cl.add("Control.Ping after calls", err == nil, "%v", err)
	return finish()
}
