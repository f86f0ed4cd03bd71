package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/rpc"
	"strings"
	"time"

	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/hostkit"
	"rollgate.test/gohost/pluginrpc"
)

// gobUint encodes n the way gob encodes an unsigned integer (a frame length, a type id).
func gobUint(n uint64) []byte {
	if n < 0x80 {
		return []byte{byte(n)}
	}
	var b []byte
	for ; n > 0; n >>= 8 {
		b = append([]byte{byte(n)}, b...)
	}
	return append([]byte{byte(-len(b))}, b...)
}

func cmdGarbage(args []string) int {
	fs, c := hostkit.NewCommand(program, "garbage")
	spec := fs.String("spec", defaultSpec, "plugin config JSON; {{address}} -> a closed-port URL")
	key := fs.String("key", "rollgate/analysis", "key of the plugin config under provider.plugin")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	addr, err := closedPortURL()
	if err != nil {
		return c.SetupErr(err)
	}
	r, err := rawLaunch(c)
	if err != nil {
		return c.SetupErr(err)
	}
	defer r.kill()
	rng := rand.New(rand.NewSource(1))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	metric := pluginMetric("garbage", *key, specFor(*spec, addr))
	run := buildRun(defaultIdentity, metric, time.Now())
	var cl checklist

	runOn := func(c *rpc.Client) error {
		var args interface{} = pluginrpc.RunArgs{AnalysisRun: run, Metric: metric}
		var m a.Measurement
		if err := call(c, "Plugin.Run", &args, &m, 10*time.Second); err != nil {
			return err
		}
		if m.Phase == "" {
			return errors.New("Run reply with an empty phase")
		}
		return nil
	}
	typeOn := func(c *rpc.Client) error {
		var t string
		if err := call(c, "Plugin.Type", new(interface{}), &t, 5*time.Second); err != nil {
			return err
		}
		if t == "" {
			return errors.New("empty Type reply")
		}
		return nil
	}

	main, _, err := r.dispense()
	if !cl.add("dispense", err == nil, "%v", err) {
		return garbageDone(c, r, &cl)
	}
	err = runOn(main)
	if !cl.add("normal Run", err == nil, "%v", err) {
		return garbageDone(c, r, &cl)
	}
	// others verifies that the control stream and the first plugin stream still answer.
	others := func() string {
		var empty struct{}
		var problems []string
		if err := call(r.control, "Control.Ping", true, &empty, 5*time.Second); err != nil {
			problems = append(problems, "Control.Ping: "+err.Error())
		}
		if err := typeOn(main); err != nil {
			problems = append(problems, "Plugin.Type on the first stream: "+err.Error())
		}
		if err := runOn(main); err != nil {
			problems = append(problems, "Plugin.Run on the first stream: "+err.Error())
		}
		if r.exited() {
			problems = append(problems, "plugin exited")
		}
		return strings.Join(problems, "; ")
	}
	afterCase := func(name, note string) {
		p := others()
		if p == "" {
			cl.add(name, true, "%s", note)
		} else {
			cl.add(name, false, "%s (%s)", p, note)
		}
	}
	// fate reports what became of a stream that received garbage.
	fate := func(c *rpc.Client) string {
		err := typeOn(c)
		switch {
		case err == nil:
			return "stream still answers"
		case errors.Is(err, rpc.ErrShutdown) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "shut down"):
			return "stream closed by the plugin"
		default:
			return "stream: " + err.Error()
		}
	}

	// 1. A garbage gob frame on a dispensed stream after a valid call on it.
	if c1, st, err := r.dispense(); err != nil {
		cl.add("garbage frame", false, "dispense: %v", err)
	} else {
		_ = typeOn(c1)
		frame := append(gobUint(24), garbage(24)...)
		_, werr := st.Write(frame)
		afterCase("garbage frame", fmt.Sprintf("write %v; %s", werr, fate(c1)))
	}

	// 2. A frame that claims an enormous length: the plugin must neither allocate it nor stall.
	rssBefore, _, _ := procStatus(r.cmd.Process.Pid)
	if c2, st, err := r.dispense(); err != nil {
		cl.add("huge frame length", false, "dispense: %v", err)
	} else {
		frame := append(gobUint(1<<60), garbage(64)...)
		_, werr := st.Write(frame)
		time.Sleep(200 * time.Millisecond)
		rssAfter, _, _ := procStatus(r.cmd.Process.Pid)
		note := fmt.Sprintf("write %v; rss %d -> %d kB; %s", werr, rssBefore, rssAfter, fate(c2))
		if rssAfter-rssBefore > 256*1024 {
			cl.add("huge frame length", false, "RSS grew by %d kB; %s", rssAfter-rssBefore, note)
		} else {
			afterCase("huge frame length", note)
		}
	}

	// 3. A raw stream that sends garbage where the broker id belongs.
	if st, err := r.sess.OpenStream(); err != nil {
		cl.add("garbage broker id", false, "open: %v", err)
	} else {
		_, werr := st.Write(append([]byte{0xef, 0xbe, 0xad, 0xde}, garbage(40)...))
		afterCase("garbage broker id", fmt.Sprintf("write %v", werr))
		st.Close()
	}

	// 4. A frame cut short, then the stream closed.
	if _, st, err := r.dispense(); err != nil {
		cl.add("truncated frame", false, "dispense: %v", err)
	} else {
		_, werr := st.Write(append(gobUint(1000), garbage(10)...))
		st.Close()
		afterCase("truncated frame", fmt.Sprintf("write %v", werr))
	}

	// 5. An unknown method gets an error reply and the stream keeps working (net/rpc semantics).
	if c5, _, err := r.dispense(); err != nil {
		cl.add("unknown method", false, "dispense: %v", err)
	} else {
		var x string
		cerr := call(c5, "Plugin.NoSuchMethod", "x", &x, 5*time.Second)
		_, isServerErr := cerr.(rpc.ServerError)
		terr := typeOn(c5)
		cl.add("unknown method", isServerErr && terr == nil,
			"reply error %v (want an rpc error reply); next call on the stream: %v", cerr, terr)
	}

	// 6. Plugin.Run with an argument of the wrong type: an error (reply or Error phase), and the
	// stream keeps working.
	if c6, _, err := r.dispense(); err != nil {
		cl.add("wrong argument type", false, "dispense: %v", err)
	} else {
		var bogus interface{} = "not RunArgs"
		var m a.Measurement
		cerr := call(c6, "Plugin.Run", &bogus, &m, 5*time.Second)
		_, isServerErr := cerr.(rpc.ServerError)
		rejected := isServerErr || (cerr == nil && m.Phase == a.AnalysisPhaseError)
		terr := typeOn(c6)
		cl.add("wrong argument type", rejected && terr == nil,
			"reply error %v, phase %q; next call on the stream: %v", cerr, m.Phase, terr)
	}

	// Finally the session as a whole: a fresh dispense still works.
	if c7, _, err := r.dispense(); err != nil {
		cl.add("fresh dispense after garbage", false, "dispense: %v", err)
	} else {
		err := runOn(c7)
		cl.add("fresh dispense after garbage", err == nil, "%v", err)
	}
	p := others()
	cl.add("control and first stream at the end", p == "", "%s", p)
	return garbageDone(c, r, &cl)
}

func garbageDone(c *hostkit.Command, r *rawPlugin, cl *checklist) int {
	extra := r.extraStdout()
	cl.add("nothing on stdout after the handshake", extra == 0, "%d bytes", extra)
	failed := cl.failed()
	out := struct {
		OK        bool    `json:"ok"`
		Handshake string  `json:"handshake"`
		Checks    []check `json:"checks"`
	}{len(failed) == 0, r.handshake, cl.Checks}
	c.Emit(out)
	if !out.OK {
		return c.Failf("%d check(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return 0
}
