package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
)

// The expected values, in the shape fixture_tests.rs compares decoded calls against.

type runJSON struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

type metricJSON struct {
	Name                    string            `json:"name"`
	Interval                string            `json:"interval"`
	InitialDelay            string            `json:"initialDelay"`
	Count                   string            `json:"count"`
	SuccessCondition        string            `json:"successCondition"`
	FailureCondition        string            `json:"failureCondition"`
	FailureLimit            string            `json:"failureLimit"`
	InconclusiveLimit       string            `json:"inconclusiveLimit"`
	ConsecutiveErrorLimit   string            `json:"consecutiveErrorLimit"`
	ConsecutiveSuccessLimit string            `json:"consecutiveSuccessLimit"`
	Plugin                  map[string]string `json:"plugin"`
}

type measurementJSON struct {
	Phase      string            `json:"phase"`
	Message    string            `json:"message"`
	Value      string            `json:"value"`
	Metadata   map[string]string `json:"metadata"`
	StartedAt  *string           `json:"startedAt"`
	FinishedAt *string           `json:"finishedAt"`
	ResumeAt   *string           `json:"resumeAt"`
}

type callJSON struct {
	Seq         uint64           `json:"seq"`
	Method      string           `json:"method"`
	Run         *runJSON         `json:"run,omitempty"`
	Metric      *metricJSON      `json:"metric,omitempty"`
	Measurement *measurementJSON `json:"measurement,omitempty"`
	Limit       *int             `json:"limit,omitempty"`
	Error       string           `json:"error,omitempty"`
}

// ios spells an IntOrString as the Rust test's ios() does.
func ios(v *k.IntOrString) string {
	switch {
	case v == nil:
		return "nil"
	case v.Type == k.String:
		return "str:" + v.StrVal
	default:
		return fmt.Sprintf("int:%d", v.IntVal)
	}
}

// runOf is what rollgate keeps of an AnalysisRun; a nil run decodes to empty strings.
func runOf(ar *a.AnalysisRun) *runJSON {
	if ar == nil {
		return &runJSON{}
	}
	return &runJSON{Name: ar.Name, Namespace: ar.Namespace, UID: string(ar.UID)}
}

func metricOf(m a.Metric) *metricJSON {
	p := map[string]string{}
	for key, v := range m.Provider.Plugin {
		p[key] = string(v)
	}
	return &metricJSON{
		Name: m.Name, Interval: string(m.Interval), InitialDelay: string(m.InitialDelay),
		Count: ios(m.Count), SuccessCondition: m.SuccessCondition, FailureCondition: m.FailureCondition,
		FailureLimit: ios(m.FailureLimit), InconclusiveLimit: ios(m.InconclusiveLimit),
		ConsecutiveErrorLimit: ios(m.ConsecutiveErrorLimit), ConsecutiveSuccessLimit: ios(m.ConsecutiveSuccessLimit),
		Plugin: p,
	}
}

func timeOf(t *k.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func measurementOf(m a.Measurement) *measurementJSON {
	md := m.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return &measurementJSON{
		Phase: string(m.Phase), Message: m.Message, Value: m.Value, Metadata: md,
		StartedAt: timeOf(m.StartedAt), FinishedAt: timeOf(m.FinishedAt), ResumeAt: timeOf(m.ResumeAt),
	}
}

func writeJSON(path string, v interface{}) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
