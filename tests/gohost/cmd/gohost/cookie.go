package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"rollgate.test/gohost/hostkit"
)

func cmdCookie(args []string) int {
	fs, c := hostkit.NewCommand(program, "cookie")
	limit := fs.Duration("limit", 5*time.Second, "the plugin must exit within this long")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	wrong := "wrong-value"
	type caseOut struct {
		Name      string  `json:"name"`
		OK        bool    `json:"ok"`
		ExitCode  int     `json:"exitCode"`
		ElapsedMs float64 `json:"elapsedMs"`
		Stdout    string  `json:"stdout"`
		Stderr    string  `json:"stderr"`
	}
	var cases []caseOut
	for _, tc := range []struct {
		name   string
		cookie *string
	}{{"wrong cookie", &wrong}, {"no cookie", nil}} {
		cmd := exec.Command(c.Plugin, c.PluginArgs...)
		cmd.Env = pluginEnv(tc.cookie)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t := time.Now()
		co := caseOut{Name: tc.name, ExitCode: -1}
		if err := cmd.Start(); err != nil {
			return c.SetupErr(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
			co.ExitCode = cmd.ProcessState.ExitCode()
		case <-time.After(*limit):
			cmd.Process.Kill()
			<-done
		}
		co.ElapsedMs = hostkit.Ms(time.Since(t))
		co.Stdout = stdout.String()
		co.Stderr = stderr.String()
		if len(co.Stderr) > 2000 {
			co.Stderr = co.Stderr[:2000]
		}
		// A wrong cookie is go-plugin's refusal (exit 1); no cookie at all and no arguments is
		// rollgate run by hand without a subcommand: help and the usage-error code, 64.
		want := 1
		if tc.cookie == nil {
			want = 64
		}
		co.OK = co.ExitCode == want && stdout.Len() == 0 && strings.TrimSpace(stderr.String()) != ""
		cases = append(cases, co)
	}
	ok := true
	var bad []string
	for _, co := range cases {
		if !co.OK {
			ok = false
			bad = append(bad, fmt.Sprintf("%s: exit %d after %.0f ms, %d bytes on stdout, %d on stderr",
				co.Name, co.ExitCode, co.ElapsedMs, len(co.Stdout), len(co.Stderr)))
		}
	}
	c.Emit(struct {
		OK    bool      `json:"ok"`
		Cases []caseOut `json:"cases"`
	}{ok, cases})
	if !ok {
		return c.Failf("%s", strings.Join(bad, "; "))
	}
	return 0
}
