// Command gohost plays the Argo Rollouts controller against a metric-provider plugin binary: it
// launches the plugin with go-plugin exactly as the controller does (net/rpc only), sends full
// AnalysisRun values built from the controller's own type shapes, and prints results as JSON on
// stdout (one JSON value per line). See README.md for the subcommands.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes: 0 all checks passed, 1 a check failed (the JSON result is still printed),
// 2 usage or set-up error (message on stderr).
const (
	exitFail  = 1
	exitSetup = 2
)

var subcommands = map[string]func(args []string) int{
	"calls":    cmdCalls,
	"protocol": cmdProtocol,
	"load":     cmdLoad,
	"bigrun":   cmdBigrun,
	"garbage":  cmdGarbage,
	"quit":     cmdQuit,
	"cookie":   cmdCookie,
	"rss":      cmdRSS,
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gohost <calls|protocol|load|bigrun|garbage|quit|cookie|rss> -plugin BIN [flags] [-- plugin args...]")
	fmt.Fprintln(os.Stderr, "run 'gohost <subcommand> -h' for the flags of one subcommand")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(exitSetup)
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		usage()
		os.Exit(exitSetup)
	}
	os.Exit(run(os.Args[2:]))
}

// common holds the flags every subcommand shares.
type common struct {
	plugin       string
	env          multiFlag
	pluginStderr string
	logLevel     string
	pluginArgs   []string
	stderrSink   io.Writer
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newFlagSet(name string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	c := &common{}
	fs.StringVar(&c.plugin, "plugin", "", "path of the plugin binary (required)")
	fs.Var(&c.env, "env", "KEY=VALUE added to the plugin's environment (repeatable)")
	fs.StringVar(&c.pluginStderr, "plugin-stderr", "", "write the plugin's stderr to this file (default: gohost's stderr)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "go-plugin client log level (trace|debug|info|warn|error)")
	return fs, c
}

// parse parses flags; arguments after the flags (after "--" if given) are passed to the plugin.
func (c *common) parse(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if c.plugin == "" {
		fmt.Fprintf(os.Stderr, "gohost %s: -plugin is required\n", fs.Name())
		return false
	}
	c.pluginArgs = fs.Args()
	for _, kv := range c.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(os.Stderr, "gohost %s: -env wants KEY=VALUE, got %q\n", fs.Name(), kv)
			return false
		}
		// go-plugin appends the host's environment after Cmd.Env, so the value has to be in
		// the host's own environment to win.
		os.Setenv(k, v)
	}
	c.stderrSink = os.Stderr
	if c.pluginStderr != "" {
		f, err := os.OpenFile(c.pluginStderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gohost %s: %v\n", fs.Name(), err)
			return false
		}
		c.stderrSink = f
	}
	return true
}

func setupErr(name string, err error) int {
	fmt.Fprintf(os.Stderr, "gohost %s: %v\n", name, err)
	return exitSetup
}

// emit writes v as one line of JSON on stdout.
func emit(v interface{}) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "gohost: cannot encode output: %v\n", err)
		os.Exit(exitSetup)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
