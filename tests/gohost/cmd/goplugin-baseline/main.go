// Command goplugin-baseline is a plain Go Argo Rollouts metric-provider plugin (go-plugin net/rpc)
// that reads rollgate's plugin config subset {prometheus:{address,timeout}, query,
// minRequests:{query,count}} and queries Prometheus with net/http. It exists to validate the host
// and as the throughput baseline for rollgate's plugin; it is not a product.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	plugin "github.com/hashicorp/go-plugin"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/pluginrpc"
)

type config struct {
	Prometheus struct {
		Address string `json:"address"`
		Timeout string `json:"timeout"`
	} `json:"prometheus"`
	Query       string `json:"query"`
	MinRequests *struct {
		Query string  `json:"query"`
		Count float64 `json:"count"`
	} `json:"minRequests"`
}

type provider struct {
	http *http.Client
}

func parseConfig(m a.Metric) (config, error) {
	var c config
	if len(m.Provider.Plugin) != 1 {
		return c, fmt.Errorf("expected exactly one plugin config entry, got %d", len(m.Provider.Plugin))
	}
	for _, raw := range m.Provider.Plugin {
		if err := json.Unmarshal(raw, &c); err != nil {
			return c, fmt.Errorf("invalid plugin config: %v", err)
		}
	}
	if c.Query == "" {
		return c, fmt.Errorf("invalid plugin config: query is required")
	}
	if c.Prometheus.Address == "" {
		c.Prometheus.Address = os.Getenv("ROLLGATE_PROMETHEUS_ADDRESS")
	}
	if c.Prometheus.Address == "" {
		return c, fmt.Errorf("invalid plugin config: prometheus.address is required")
	}
	return c, nil
}

func (p *provider) InitPlugin() pluginrpc.RpcError { return pluginrpc.RpcError{} }

func (p *provider) Run(_ *a.AnalysisRun, m a.Metric) a.Measurement {
	start := time.Now()
	meas := a.Measurement{
		StartedAt: k.NewTimePtr(start),
		Metadata:  map[string]string{"metric": m.Name},
	}
	finish := func(phase a.AnalysisPhase, msg string) a.Measurement {
		meas.Phase = phase
		meas.Message = msg
		meas.FinishedAt = k.NewTimePtr(time.Now())
		return meas
	}
	c, err := parseConfig(m)
	if err != nil {
		return finish(a.AnalysisPhaseError, err.Error())
	}
	timeout := 10 * time.Second
	if c.Prometheus.Timeout != "" {
		if d, err := time.ParseDuration(c.Prometheus.Timeout); err == nil {
			timeout = d
		}
	}
	meas.Metadata["query"] = c.Query
	guardOK := true
	guardMsg := ""
	if c.MinRequests != nil {
		v, found, err := p.instant(c.Prometheus.Address, c.MinRequests.Query, timeout)
		if err != nil {
			return finish(a.AnalysisPhaseError, "minRequests query: "+err.Error())
		}
		if !found || v < c.MinRequests.Count {
			guardOK = false
			guardMsg = fmt.Sprintf("minRequests: saw %v, need %v", v, c.MinRequests.Count)
		}
	}
	v, found, err := p.instant(c.Prometheus.Address, c.Query, timeout)
	if err != nil {
		return finish(a.AnalysisPhaseError, "query: "+err.Error())
	}
	if found {
		meas.Value = formatValue(v)
	}
	switch {
	case !guardOK:
		return finish(a.AnalysisPhaseInconclusive, guardMsg)
	case !found:
		return finish(a.AnalysisPhaseInconclusive, "no data for query")
	default:
		return finish(a.AnalysisPhaseSuccessful, "")
	}
}

func (p *provider) Resume(_ *a.AnalysisRun, _ a.Metric, m a.Measurement) a.Measurement {
	return m
}

func (p *provider) Terminate(_ *a.AnalysisRun, _ a.Metric, m a.Measurement) a.Measurement {
	return m
}

func (p *provider) GarbageCollect(*a.AnalysisRun, a.Metric, int) pluginrpc.RpcError {
	return pluginrpc.RpcError{}
}

func (p *provider) Type() string { return "goplugin-baseline" }

func (p *provider) GetMetadata(m a.Metric) map[string]string {
	c, err := parseConfig(m)
	if err != nil {
		return map[string]string{"error": err.Error()}
	}
	return map[string]string{"query": c.Query}
}

func main() {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 100
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginrpc.Handshake,
		Plugins:         pluginrpc.PluginMap(&provider{http: &http.Client{Transport: tr}}),
	})
}
