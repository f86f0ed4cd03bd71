// Package hostkit is what the test hosts under tests/gohost/cmd (gohost, grpchost) share: the
// flags every subcommand takes, error and result output under the program's name, launching the
// plugin with go-plugin, and the load driver with its statistics. Test code, not product code.
package hostkit

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes of every host subcommand: 0 all checks passed, ExitFail a check failed (the JSON
// result is still printed), ExitSetup a usage or set-up error (message on stderr).
const (
	ExitFail  = 1
	ExitSetup = 2
)

// Command is one run of a host's subcommand: the program and subcommand names that prefix its
// messages, and the flags every subcommand shares (-plugin, -env, -plugin-stderr, -log-level,
// plugin arguments after the flags).
type Command struct {
	// Program is the host's name ("gohost", "grpchost").
	Program string
	// Plugin is the plugin binary (-plugin).
	Plugin string
	// PluginArgs are the arguments after the flags, passed to the plugin.
	PluginArgs []string
	// StderrSink receives the plugin's stderr and go-plugin's log (set by Parse: the
	// -plugin-stderr file, or os.Stderr).
	StderrSink io.Writer

	fs           *flag.FlagSet
	env          multiFlag
	pluginStderr string
	logLevel     string
	required     []requiredFlag
}

type requiredFlag struct {
	name  string
	value *string
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// NewCommand returns the flag set of subcommand sub of program, with the shared flags defined;
// the caller adds its own flags to it, then calls Parse.
func NewCommand(program, sub string) (*flag.FlagSet, *Command) {
	fs := flag.NewFlagSet(sub, flag.ContinueOnError)
	c := &Command{Program: program, fs: fs}
	c.RequiredString(&c.Plugin, "plugin", "path of the plugin binary (required)")
	fs.Var(&c.env, "env", "KEY=VALUE added to the plugin's environment (repeatable)")
	fs.StringVar(&c.pluginStderr, "plugin-stderr", "", "write the plugin's stderr to this file (default: "+program+"'s stderr)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "go-plugin client log level (trace|debug|info|warn|error)")
	return fs, c
}

// RequiredString defines a string flag that Parse insists on, like -plugin.
func (c *Command) RequiredString(p *string, name, usage string) {
	c.fs.StringVar(p, name, "", usage)
	c.required = append(c.required, requiredFlag{name, p})
}

// Parse parses args; what follows the flags (after "--" if given) becomes PluginArgs. It checks
// the required flags, puts the -env values into this process's environment (go-plugin appends
// the host's environment after Cmd.Env, so a value has to be there to win) and opens the
// -plugin-stderr file. On a problem it prints a message and returns false: exit ExitSetup.
func (c *Command) Parse(args []string) bool {
	if err := c.fs.Parse(args); err != nil {
		return false
	}
	for _, r := range c.required {
		if *r.value == "" {
			c.Logf("%s", requiredMessage(c.required))
			return false
		}
	}
	c.PluginArgs = c.fs.Args()
	for _, kv := range c.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			c.Logf("-env wants KEY=VALUE, got %q", kv)
			return false
		}
		os.Setenv(k, v)
	}
	c.StderrSink = os.Stderr
	if c.pluginStderr != "" {
		f, err := os.OpenFile(c.pluginStderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.Logf("%v", err)
			return false
		}
		c.StderrSink = f
	}
	return true
}

// requiredMessage says which flags are required: "-plugin is required",
// "-plugin and -descriptor are required", "-a, -b and -c are required".
func requiredMessage(req []requiredFlag) string {
	names := make([]string, len(req))
	for i, r := range req {
		names[i] = "-" + r.name
	}
	if len(names) == 1 {
		return names[0] + " is required"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are required"
}

// Logf prints one line on stderr, prefixed with the program and subcommand ("gohost load: ...").
func (c *Command) Logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "%s %s: %s\n", c.Program, c.fs.Name(), fmt.Sprintf(format, args...))
}

// SetupErr prints err as a set-up error and returns ExitSetup.
func (c *Command) SetupErr(err error) int {
	c.Logf("%v", err)
	return ExitSetup
}

// Failf prints the summary of a failed check and returns ExitFail.
func (c *Command) Failf(format string, args ...interface{}) int {
	c.Logf(format, args...)
	return ExitFail
}

// Emit writes v as one line of JSON on stdout (HTML characters not escaped); if v cannot be
// encoded it exits with ExitSetup.
func (c *Command) Emit(v interface{}) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot encode output: %v\n", c.Program, err)
		os.Exit(ExitSetup)
	}
}

// Ms is d in milliseconds, to the microsecond, as the hosts print durations.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Main runs the subcommand named by the first argument with the rest and exits with its
// status; without a known subcommand it calls usage and exits with ExitSetup.
func Main(subcommands map[string]func(args []string) int, usage func()) {
	if len(os.Args) < 2 {
		usage()
		os.Exit(ExitSetup)
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		usage()
		os.Exit(ExitSetup)
	}
	os.Exit(run(os.Args[2:]))
}
