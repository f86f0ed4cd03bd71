package hostkit

import (
	"fmt"
	"os/exec"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"rollgate.test/gohost/pluginrpc"
)

// Launched is a plugin process started by Launch, with what go-plugin dispensed for
// pluginrpc.DispenseName.
type Launched struct {
	Client *plugin.Client
	Proto  plugin.ClientProtocol
	// Dispensed is what Dispense returned; its type depends on the plugin map and the
	// negotiated protocol.
	Dispensed interface{}
	// PID is the plugin's process id (0 if go-plugin does not know it).
	PID int
}

// Launch starts the -plugin binary with its arguments as a go-plugin host does: the metric
// provider handshake, the given plugin map, allowed protocols (nil: net/rpc only) and AutoMTLS,
// Managed, the plugin's stderr and a go-plugin log (named after the program, at -log-level,
// default warn) on StderrSink. It then connects and dispenses pluginrpc.DispenseName; on an
// error the plugin is killed.
func (c *Command) Launch(plugins map[string]plugin.Plugin, protocols []plugin.Protocol, mtls bool) (*Launched, error) {
	level := hclog.LevelFromString(c.logLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  pluginrpc.Handshake,
		Plugins:          plugins,
		Cmd:              exec.Command(c.Plugin, c.PluginArgs...),
		AllowedProtocols: protocols,
		AutoMTLS:         mtls,
		Managed:          true,
		Stderr:           c.StderrSink,
		Logger:           hclog.New(&hclog.LoggerOptions{Name: c.Program, Level: level, Output: c.StderrSink}),
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
	l := &Launched{Client: client, Proto: proto, Dispensed: raw}
	if rc := client.ReattachConfig(); rc != nil {
		l.PID = rc.Pid
	}
	return l, nil
}

// Unexpected kills the plugin and returns the error for a dispensed value of the wrong type.
func (l *Launched) Unexpected() error {
	l.Client.Kill()
	return fmt.Errorf("unexpected type %T from plugin", l.Dispensed)
}
