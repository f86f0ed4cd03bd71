// Command gohost plays the Argo Rollouts controller against a metric-provider plugin binary: it
// launches the plugin with go-plugin exactly as the controller does (net/rpc only), sends full
// AnalysisRun values built from the controller's own type shapes, and prints results as JSON on
// stdout (one JSON value per line). See README.md for the subcommands.
package main

import (
	"fmt"
	"os"

	"rollgate.test/gohost/hostkit"
)

// program prefixes gohost's messages ("gohost load: ...").
const program = "gohost"

var subcommands = map[string]func(args []string) int{
	"calls":    cmdCalls,
	"protocol": cmdProtocol,
	"load":     cmdLoad,
	"bigrun":   cmdBigrun,
	"garbage":  cmdGarbage,
	"quit":     cmdQuit,
	"cookie":   cmdCookie,
	"rss":      cmdRSS,
	"spanning": cmdSpanning,
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gohost <calls|protocol|load|bigrun|garbage|quit|cookie|rss|spanning> -plugin BIN [flags] [-- plugin args...]")
	fmt.Fprintln(os.Stderr, "run 'gohost <subcommand> -h' for the flags of one subcommand")
}

func main() { hostkit.Main(subcommands, usage) }
