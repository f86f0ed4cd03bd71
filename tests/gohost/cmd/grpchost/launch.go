package main

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"rollgate.test/gohost/pluginrpc"
)

// grpcPlugin is the host's side of the dispensed plugin in gRPC mode: it hands back the
// connection, on which grpchost calls services by name.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

func (grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return fmt.Errorf("grpchost is a host, not a plugin")
}

func (grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (interface{}, error) {
	return c, nil
}

// session is a launched plugin.
type session struct {
	client *plugin.Client
	proto  plugin.ClientProtocol
	conn   *grpc.ClientConn  // gRPC mode
	rpc    *pluginrpc.Client // net/rpc mode
	pid    int
}

// launch starts the plugin as a go-plugin host allowing `protocols` does, with AutoMTLS when
// mtls is set, and dispenses the metric provider.
func launch(c *common, protocols []plugin.Protocol, mtls bool) (*session, error) {
	level := hclog.LevelFromString(c.logLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	plugins := map[string]plugin.Plugin{pluginrpc.DispenseName: &grpcPlugin{}}
	if len(protocols) == 1 && protocols[0] == plugin.ProtocolNetRPC {
		plugins = pluginrpc.PluginMap(nil)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		Plugins:          plugins,
		Cmd:              exec.Command(c.plugin, c.pluginArgs...),
		AllowedProtocols: protocols,
		AutoMTLS:         mtls,
		Managed:          true,
		Stderr:           c.stderrSink,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "grpchost", Level: level, Output: c.stderrSink}),
	})
	proto, err := client.Client()
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("unable to get plugin client: %w", err)
	}
	raw, err := proto.Dispense(pluginrpc.DispenseName)
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("unable to dispense plugin: %w", err)
	}
	s := &session{client: client, proto: proto}
	switch v := raw.(type) {
	case *grpc.ClientConn:
		s.conn = v
	case *pluginrpc.Client:
		s.rpc = v
	default:
		client.Kill()
		return nil, fmt.Errorf("unexpected type %T from plugin", raw)
	}
	if rc := client.ReattachConfig(); rc != nil {
		s.pid = rc.Pid
	}
	return s, nil
}

// procAlive reports whether pid is still a running (not reaped) process.
func procAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
