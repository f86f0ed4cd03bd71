package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"rollgate.test/gohost/hostkit"
)

func procAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func cmdQuit(args []string) int {
	fs, c := hostkit.NewCommand(program, "quit")
	limit := fs.Duration("limit", time.Second, "the plugin must exit within this long")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	var cl checklist
	type caseOut struct {
		Name      string  `json:"name"`
		ElapsedMs float64 `json:"elapsedMs"`
		Exited    bool    `json:"exited"`
		ExitCode  *int    `json:"exitCode,omitempty"`
	}
	var cases []caseOut

	// 1. go-plugin's Kill(): Control.Quit, close the streams, wait up to 2 s, then SIGKILL.
	if s, err := launch(c); err != nil {
		cl.add("go-plugin Kill", false, "launch: %v", err)
	} else {
		_, terr := s.rpc.Type()
		t := time.Now()
		s.client.Kill()
		el := time.Since(t)
		exited := s.pid != 0 && !procAlive(s.pid)
		cases = append(cases, caseOut{Name: "go-plugin Kill", ElapsedMs: hostkit.Ms(el), Exited: exited})
		cl.add("go-plugin Kill", terr == nil && exited && el <= *limit,
			"Type error %v; Kill took %s (go-plugin force-kills after 2s), exited %v", terr, el.Round(time.Millisecond), exited)
	}

	// 2. Control.Quit by hand; the process must be gone within the limit.
	if r, err := rawLaunch(c); err != nil {
		cl.add("Control.Quit", false, "launch: %v", err)
	} else {
		var note []string
		if p, _, err := r.dispense(); err != nil {
			note = append(note, "dispense: "+err.Error())
		} else {
			var typ string
			if err := call(p, "Plugin.Type", new(interface{}), &typ, 5*time.Second); err != nil {
				note = append(note, "Type: "+err.Error())
			}
		}
		var empty struct{}
		t := time.Now()
		qerr := call(r.control, "Control.Quit", true, &empty, *limit)
		exited := r.waitExit(*limit - time.Since(t))
		el := time.Since(t)
		co := caseOut{Name: "Control.Quit", ElapsedMs: hostkit.Ms(el), Exited: exited}
		if exited {
			code := r.exitCode()
			co.ExitCode = &code
		}
		cases = append(cases, co)
		// A Quit reply lost to the exit is fine; the exit is what counts.
		cl.add("Control.Quit", exited && len(note) == 0,
			"exited %v after %s; Quit reply %v; %s", exited, el.Round(time.Millisecond), qerr, strings.Join(note, "; "))
		r.kill()
	}

	// 3. The host goes away (session closed without Quit): informational only, go-plugin
	// plugins differ here.
	if r, err := rawLaunch(c); err == nil {
		t := time.Now()
		r.sess.Close()
		r.conn.Close()
		exited := r.waitExit(*limit)
		cases = append(cases, caseOut{Name: "session closed (info)", ElapsedMs: hostkit.Ms(time.Since(t)), Exited: exited})
		r.kill()
	}

	failed := cl.failed()
	out := struct {
		OK     bool      `json:"ok"`
		Cases  []caseOut `json:"cases"`
		Checks []check   `json:"checks"`
	}{len(failed) == 0, cases, cl.Checks}
	c.Emit(out)
	if !out.OK {
		return c.Failf("%s", strings.Join(failed, "; "))
	}
	return 0
}
