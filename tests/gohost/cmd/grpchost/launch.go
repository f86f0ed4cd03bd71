package main

import (
	"context"
	"fmt"
	"syscall"

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
// mtls is set, and dispenses the metric provider: a gRPC connection or a net/rpc client.
func launch(c *common, protocols []plugin.Protocol, mtls bool) (*session, error) {
	plugins := map[string]plugin.Plugin{pluginrpc.DispenseName: &grpcPlugin{}}
	if len(protocols) == 1 && protocols[0] == plugin.ProtocolNetRPC {
		plugins = pluginrpc.PluginMap(nil)
	}
	l, err := c.Launch(plugins, protocols, mtls)
	if err != nil {
		return nil, err
	}
	s := &session{client: l.Client, proto: l.Proto, pid: l.PID}
	switch v := l.Dispensed.(type) {
	case *grpc.ClientConn:
		s.conn = v
	case *pluginrpc.Client:
		s.rpc = v
	default:
		return nil, l.Unexpected()
	}
	return s, nil
}

// procAlive reports whether pid is still a running (not reaped) process.
func procAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}
