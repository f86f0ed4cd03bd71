// Command grpchost plays a go-plugin host that allows the gRPC protocol against rollgate's
// go-plugin gRPC mode: it launches the plugin with go-plugin (AllowedProtocols netrpc and grpc,
// AutoMTLS), checks the go-plugin services (handshake, health, controller, stdio, broker) and
// calls rollgate.v1.MetricProviderService with requests given as protobuf JSON, resolved from a
// descriptor set at run time (no generated Go code). `load` drives Run over gRPC or net/rpc and
// reports the plugin's CPU per call. See README.md in this directory. Test code, not product code.
package main

import (
	"flag"
	"fmt"
	"os"

	"rollgate.test/gohost/hostkit"
)

// program prefixes grpchost's messages ("grpchost load: ...").
const program = "grpchost"

var subcommands = map[string]func(args []string) int{
	"check": cmdCheck,
	"load":  cmdLoad,
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: grpchost <check|load> -plugin BIN -descriptor FILE [flags] [-- plugin args...]")
}

func main() { hostkit.Main(subcommands, usage) }

// common is a subcommand's run with the shared flags and grpchost's -descriptor.
type common struct {
	*hostkit.Command
	descriptor string
}

// newFlagSet returns the flag set of subcommand name with the flags every subcommand takes.
func newFlagSet(name string) (*flag.FlagSet, *common) {
	fs, cmd := hostkit.NewCommand(program, name)
	c := &common{Command: cmd}
	cmd.RequiredString(&c.descriptor, "descriptor", "encoded FileDescriptorSet of rollgate.v1 (required)")
	return fs, c
}

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
