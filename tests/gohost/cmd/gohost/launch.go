package main

import (
	"sync"

	plugin "github.com/hashicorp/go-plugin"

	"rollgate.test/gohost/hostkit"
	"rollgate.test/gohost/pluginrpc"
)

// session is a plugin started the way the controller starts it
// (metricproviders/plugin/client): go-plugin client, no AllowedProtocols (net/rpc only),
// Managed, then Client(), Dispense and InitPlugin is left to the caller.
type session struct {
	client *plugin.Client
	proto  plugin.ClientProtocol
	rpc    *pluginrpc.Client
	pid    int
	// pingMu serialises Ping the way the controller does: it pings under a global mutex
	// before handing out the plugin for every measurement.
	pingMu sync.Mutex
}

// launch starts the plugin as the controller does (net/rpc only) and dispenses its client.
func launch(c *hostkit.Command) (*session, error) {
	l, err := c.Launch(pluginrpc.PluginMap(nil), nil, false)
	if err != nil {
		return nil, err
	}
	rc, ok := l.Dispensed.(*pluginrpc.Client)
	if !ok {
		return nil, l.Unexpected()
	}
	return &session{client: l.Client, proto: l.Proto, rpc: rc, pid: l.PID}, nil
}

// ping is the controller's per-measurement health check.
func (s *session) ping() error {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	return s.proto.Ping()
}

func (s *session) close() { s.client.Kill() }
