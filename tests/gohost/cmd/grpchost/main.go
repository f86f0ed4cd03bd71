// Command grpchost plays a go-plugin host that allows the gRPC protocol against rollgate's
// go-plugin gRPC mode: it launches the plugin with go-plugin (AllowedProtocols netrpc and grpc,
// AutoMTLS), checks the go-plugin services (handshake, health, controller, stdio, broker) and
// calls rollgate.v1.MetricProviderService with requests given as protobuf JSON, resolved from a
// descriptor set at run time (no generated Go code). `load` drives Run over gRPC or net/rpc and
// reports the plugin's CPU per call. See README.md in this directory. Test code, not product code.
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
	"check": cmdCheck,
	"load":  cmdLoad,
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: grpchost <check|load> -plugin BIN -descriptor FILE [flags] [-- plugin args...]")
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
	descriptor   string
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
	fs.StringVar(&c.descriptor, "descriptor", "", "encoded FileDescriptorSet of rollgate.v1 (required)")
	fs.Var(&c.env, "env", "KEY=VALUE added to the plugin's environment (repeatable)")
	fs.StringVar(&c.pluginStderr, "plugin-stderr", "", "write the plugin's stderr to this file (default: grpchost's stderr)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "go-plugin client log level")
	return fs, c
}

// parse parses flags; arguments after the flags are passed to the plugin.
func (c *common) parse(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if c.plugin == "" || c.descriptor == "" {
		fmt.Fprintf(os.Stderr, "grpchost %s: -plugin and -descriptor are required\n", fs.Name())
		return false
	}
	c.pluginArgs = fs.Args()
	for _, kv := range c.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(os.Stderr, "grpchost %s: -env wants KEY=VALUE, got %q\n", fs.Name(), kv)
			return false
		}
		// go-plugin appends the host's environment after Cmd.Env: set it in our own.
		os.Setenv(k, v)
	}
	c.stderrSink = os.Stderr
	if c.pluginStderr != "" {
		f, err := os.OpenFile(c.pluginStderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "grpchost %s: %v\n", fs.Name(), err)
			return false
		}
		c.stderrSink = f
	}
	return true
}

func setupErr(name string, err error) int {
	fmt.Fprintf(os.Stderr, "grpchost %s: %v\n", name, err)
	return exitSetup
}

// emit writes v as one line of JSON on stdout.
func emit(v interface{}) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "grpchost: cannot encode output: %v\n", err)
		os.Exit(exitSetup)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// check is one named pass/fail result with a detail.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type checklist struct{ checks []check }

func (c *checklist) add(name string, ok bool, detail string, args ...interface{}) bool {
	c.checks = append(c.checks, check{Name: name, OK: ok, Detail: fmt.Sprintf(detail, args...)})
	return ok
}

func (c *checklist) failed() []string {
	var out []string
	for _, ch := range c.checks {
		if !ch.OK {
			out = append(out, ch.Name+": "+ch.Detail)
		}
	}
	return out
}
