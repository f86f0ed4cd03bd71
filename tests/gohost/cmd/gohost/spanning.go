package main

import (
	"fmt"
	"io/ioutil"
	"syscall"
	"time"

	"rollgate.test/gohost/hostkit"
)

// cmdSpanning writes a prepared request (length-prefixed gob messages from -frames, e.g. a
// Plugin.Run whose value spans many messages) on a dispensed plugin stream, as raw bytes.
// Without -sigterm-after it then calls Plugin.Type on the same stream: net/rpc reads requests
// in order, so Type is answered only once the prepared request has been decoded, and its
// latency is the decoding time. With -sigterm-after D it sends SIGTERM D after the write began
// and reports how long the process took to exit.
func cmdSpanning(args []string) int {
	fs, c := hostkit.NewCommand(program, "spanning")
	frames := fs.String("frames", "", "file of length-prefixed gob messages to write (required)")
	limit := fs.Duration("limit", 60*time.Second, "longest wait for the Type reply or the exit")
	sigterm := fs.Duration("sigterm-after", 0, "send SIGTERM this long after the write began (0: no signal)")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	data, err := ioutil.ReadFile(*frames)
	if err != nil {
		return c.SetupErr(err)
	}
	r, err := rawLaunch(c)
	if err != nil {
		return c.SetupErr(err)
	}
	defer r.kill()
	client, st, err := r.dispense()
	if err != nil {
		return c.SetupErr(fmt.Errorf("dispense: %w", err))
	}
	out := struct {
		Bytes       int     `json:"bytes"`
		WriteMs     float64 `json:"writeMs"`
		WriteError  string  `json:"writeError,omitempty"`
		TypeMs      float64 `json:"typeMs,omitempty"`
		TypeError   string  `json:"typeError,omitempty"`
		Signalled   bool    `json:"signalled"`
		ExitMs      float64 `json:"exitMs,omitempty"`
		Exited      bool    `json:"exited"`
		ExitCode    int     `json:"exitCode"`
		ExtraStdout int     `json:"extraStdout"`
	}{Bytes: len(data), ExitCode: -1}
	start := time.Now()
	written := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		written <- err
	}()
	if *sigterm > 0 {
		time.Sleep(*sigterm)
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return c.SetupErr(fmt.Errorf("SIGTERM: %w", err))
		}
		out.Signalled = true
		t := time.Now()
		out.Exited = r.waitExit(*limit)
		out.ExitMs = hostkit.Ms(time.Since(t))
		out.ExitCode = r.exitCode()
	} else {
		select {
		case err := <-written:
			out.WriteMs = hostkit.Ms(time.Since(start))
			if err != nil {
				out.WriteError = err.Error()
			}
		case <-time.After(*limit):
			out.WriteError = "write did not finish within the limit"
		}
		var typ string
		if err := call(client, "Plugin.Type", new(interface{}), &typ, *limit); err != nil {
			out.TypeError = err.Error()
		}
		out.TypeMs = hostkit.Ms(time.Since(start))
		out.Exited = r.exited()
	}
	out.ExtraStdout = r.extraStdout()
	c.Emit(out)
	return 0
}
