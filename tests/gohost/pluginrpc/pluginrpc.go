// Package pluginrpc is the go-plugin glue of an Argo Rollouts metric-provider plugin: the
// handshake the controller uses, a client with the controller's calling convention, and a
// net/rpc server with the controller's method signatures (for the Go baseline plugin).
package pluginrpc

import (
	"fmt"
	"net/rpc"

	plugin "github.com/hashicorp/go-plugin"

	"rollgate.test/gohost/argotypes/v1alpha1"
)

// Handshake is the controller's go-plugin handshake.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "ARGO_ROLLOUTS_RPC_PLUGIN",
	MagicCookieValue: "metricprovider",
}

// DispenseName is the plugin name the controller dispenses.
const DispenseName = "RpcMetricProviderPlugin"

// Provider is what a plugin implements (the controller's MetricProviderPlugin).
type Provider interface {
	InitPlugin() RpcError
	Run(*v1alpha1.AnalysisRun, v1alpha1.Metric) v1alpha1.Measurement
	Resume(*v1alpha1.AnalysisRun, v1alpha1.Metric, v1alpha1.Measurement) v1alpha1.Measurement
	Terminate(*v1alpha1.AnalysisRun, v1alpha1.Metric, v1alpha1.Measurement) v1alpha1.Measurement
	GarbageCollect(*v1alpha1.AnalysisRun, v1alpha1.Metric, int) RpcError
	Type() string
	GetMetadata(v1alpha1.Metric) map[string]string
}

// Plugin implements plugin.Plugin for both sides. Impl is only used on the server side.
type Plugin struct {
	Impl Provider
}

// Server returns the net/rpc receiver registered under the name "Plugin".
func (p *Plugin) Server(*plugin.MuxBroker) (interface{}, error) {
	return &Server{Impl: p.Impl}, nil
}

// Client wraps the rpc client of the dispensed stream.
func (Plugin) Client(_ *plugin.MuxBroker, c *rpc.Client) (interface{}, error) {
	return &Client{RPC: c}, nil
}

// PluginMap is the controller's plugin map.
func PluginMap(impl Provider) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{DispenseName: &Plugin{Impl: impl}}
}

// Client calls the plugin exactly as the controller's MetricsPluginRPC does (an interface{}
// argument holding the args struct, passed by pointer), but returns the raw reply and the
// transport error separately instead of folding the error into the reply.
type Client struct {
	RPC *rpc.Client
}

// InitPlugin calls Plugin.InitPlugin with a nil interface argument.
func (c *Client) InitPlugin() (RpcError, error) {
	var resp RpcError
	err := c.RPC.Call("Plugin.InitPlugin", new(interface{}), &resp)
	return resp, err
}

// Run calls Plugin.Run.
func (c *Client) Run(ar *v1alpha1.AnalysisRun, m v1alpha1.Metric) (v1alpha1.Measurement, error) {
	var resp v1alpha1.Measurement
	var args interface{} = RunArgs{AnalysisRun: ar, Metric: m}
	err := c.RPC.Call("Plugin.Run", &args, &resp)
	return resp, err
}

// Resume calls Plugin.Resume.
func (c *Client) Resume(ar *v1alpha1.AnalysisRun, m v1alpha1.Metric, meas v1alpha1.Measurement) (v1alpha1.Measurement, error) {
	var resp v1alpha1.Measurement
	var args interface{} = TerminateAndResumeArgs{AnalysisRun: ar, Metric: m, Measurement: meas}
	err := c.RPC.Call("Plugin.Resume", &args, &resp)
	return resp, err
}

// Terminate calls Plugin.Terminate.
func (c *Client) Terminate(ar *v1alpha1.AnalysisRun, m v1alpha1.Metric, meas v1alpha1.Measurement) (v1alpha1.Measurement, error) {
	var resp v1alpha1.Measurement
	var args interface{} = TerminateAndResumeArgs{AnalysisRun: ar, Metric: m, Measurement: meas}
	err := c.RPC.Call("Plugin.Terminate", &args, &resp)
	return resp, err
}

// GarbageCollect calls Plugin.GarbageCollect.
func (c *Client) GarbageCollect(ar *v1alpha1.AnalysisRun, m v1alpha1.Metric, limit int) (RpcError, error) {
	var resp RpcError
	var args interface{} = GarbageCollectArgs{AnalysisRun: ar, Metric: m, Limit: limit}
	err := c.RPC.Call("Plugin.GarbageCollect", &args, &resp)
	return resp, err
}

// Type calls Plugin.Type with a nil interface argument.
func (c *Client) Type() (string, error) {
	var resp string
	err := c.RPC.Call("Plugin.Type", new(interface{}), &resp)
	return resp, err
}

// GetMetadata calls Plugin.GetMetadata.
func (c *Client) GetMetadata(m v1alpha1.Metric) (map[string]string, error) {
	var resp map[string]string
	var args interface{} = GetMetadataArgs{Metric: m}
	err := c.RPC.Call("Plugin.GetMetadata", &args, &resp)
	return resp, err
}

// Server is the net/rpc receiver, with the signatures of the controller's MetricsRPCServer.
type Server struct {
	Impl Provider
}

// InitPlugin serves Plugin.InitPlugin.
func (s *Server) InitPlugin(_ interface{}, resp *RpcError) error {
	*resp = s.Impl.InitPlugin()
	return nil
}

// Run serves Plugin.Run.
func (s *Server) Run(args interface{}, resp *v1alpha1.Measurement) error {
	a, ok := args.(*RunArgs)
	if !ok {
		return fmt.Errorf("invalid args %T", args)
	}
	*resp = s.Impl.Run(a.AnalysisRun, a.Metric)
	return nil
}

// Resume serves Plugin.Resume.
func (s *Server) Resume(args interface{}, resp *v1alpha1.Measurement) error {
	a, ok := args.(*TerminateAndResumeArgs)
	if !ok {
		return fmt.Errorf("invalid args %T", args)
	}
	*resp = s.Impl.Resume(a.AnalysisRun, a.Metric, a.Measurement)
	return nil
}

// Terminate serves Plugin.Terminate.
func (s *Server) Terminate(args interface{}, resp *v1alpha1.Measurement) error {
	a, ok := args.(*TerminateAndResumeArgs)
	if !ok {
		return fmt.Errorf("invalid args %T", args)
	}
	*resp = s.Impl.Terminate(a.AnalysisRun, a.Metric, a.Measurement)
	return nil
}

// GarbageCollect serves Plugin.GarbageCollect.
func (s *Server) GarbageCollect(args interface{}, resp *RpcError) error {
	a, ok := args.(*GarbageCollectArgs)
	if !ok {
		return fmt.Errorf("invalid args %T", args)
	}
	*resp = s.Impl.GarbageCollect(a.AnalysisRun, a.Metric, a.Limit)
	return nil
}

// Type serves Plugin.Type.
func (s *Server) Type(_ interface{}, resp *string) error {
	*resp = s.Impl.Type()
	return nil
}

// GetMetadata serves Plugin.GetMetadata.
func (s *Server) GetMetadata(args interface{}, resp *map[string]string) error {
	a, ok := args.(*GetMetadataArgs)
	if !ok {
		return fmt.Errorf("invalid args %T", args)
	}
	*resp = s.Impl.GetMetadata(a.Metric)
	return nil
}
