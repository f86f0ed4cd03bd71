package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type promResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// instant runs an instant query and returns the first sample's value; found is false for an
// empty result or a NaN sample.
func (p *provider) instant(address, query string, timeout time.Duration) (float64, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	u := strings.TrimRight(address, "/") + "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(url.Values{"query": {query}}.Encode()))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, false, err
	}
	var pr promResponse
	if err := json.Unmarshal(body, &pr); err != nil {
		return 0, false, fmt.Errorf("HTTP %d: invalid JSON: %v", resp.StatusCode, err)
	}
	if pr.Status != "success" {
		return 0, false, fmt.Errorf("HTTP %d: %s", resp.StatusCode, pr.Error)
	}
	var sample []interface{}
	switch pr.Data.ResultType {
	case "scalar":
		if err := json.Unmarshal(pr.Data.Result, &sample); err != nil {
			return 0, false, err
		}
	case "vector":
		var vec []struct {
			Value []interface{} `json:"value"`
		}
		if err := json.Unmarshal(pr.Data.Result, &vec); err != nil {
			return 0, false, err
		}
		if len(vec) == 0 {
			return 0, false, nil
		}
		sample = vec[0].Value
	default:
		return 0, false, fmt.Errorf("unsupported result type %q", pr.Data.ResultType)
	}
	if len(sample) != 2 {
		return 0, false, fmt.Errorf("malformed sample")
	}
	s, ok := sample[1].(string)
	if !ok {
		return 0, false, fmt.Errorf("malformed sample value")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, err
	}
	if math.IsNaN(v) {
		return 0, false, nil
	}
	return v, true, nil
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
