package main

import (
	"fmt"
	"os/exec"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

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

func launch(c *common) (*session, error) {
	level := hclog.LevelFromString(c.logLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: pluginrpc.Handshake,
		Plugins:         pluginrpc.PluginMap(nil),
		Cmd:             exec.Command(c.plugin, c.pluginArgs...),
		Managed:         true,
		Stderr:          c.stderrSink,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "gohost", Level: level, Output: c.stderrSink}),
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
	rc, ok := raw.(*pluginrpc.Client)
	if !ok {
		client.Kill()
		return nil, fmt.Errorf("unexpected type %T from plugin", raw)
	}
	s := &session{client: client, proto: proto, rpc: rc}
	if rcfg := client.ReattachConfig(); rcfg != nil {
		s.pid = rcfg.Pid
	}
	return s, nil
}

// ping is the controller's per-measurement health check.
func (s *session) ping() error {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	return s.proto.Ping()
}

func (s *session) close() { s.client.Kill() }
