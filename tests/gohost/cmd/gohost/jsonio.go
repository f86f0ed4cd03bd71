package main

import (
	"encoding/json"
	"fmt"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
)

// jsonMeasurement is a Measurement as printed and read by gohost: times are RFC3339Nano strings
// with their zone offset as decoded, nil times are null.
type jsonMeasurement struct {
	Phase      string            `json:"phase"`
	Message    string            `json:"message"`
	StartedAt  *string           `json:"startedAt"`
	FinishedAt *string           `json:"finishedAt"`
	Value      string            `json:"value"`
	Metadata   map[string]string `json:"metadata"`
	ResumeAt   *string           `json:"resumeAt"`
}

func fmtTime(t *k.Time) *string {
	if t == nil {
		return nil
	}
	s := t.Time.Format(time.RFC3339Nano)
	return &s
}

func parseTime(s *string) (*k.Time, error) {
	if s == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return nil, err
	}
	return k.NewTimePtr(t), nil
}

func toJSONMeasurement(m a.Measurement) jsonMeasurement {
	return jsonMeasurement{
		Phase:      string(m.Phase),
		Message:    m.Message,
		StartedAt:  fmtTime(m.StartedAt),
		FinishedAt: fmtTime(m.FinishedAt),
		Value:      m.Value,
		Metadata:   m.Metadata,
		ResumeAt:   fmtTime(m.ResumeAt),
	}
}

func fromJSONMeasurement(j jsonMeasurement) (a.Measurement, error) {
	m := a.Measurement{Phase: a.AnalysisPhase(j.Phase), Message: j.Message, Value: j.Value, Metadata: j.Metadata}
	var err error
	if m.StartedAt, err = parseTime(j.StartedAt); err != nil {
		return m, fmt.Errorf("startedAt: %w", err)
	}
	if m.FinishedAt, err = parseTime(j.FinishedAt); err != nil {
		return m, fmt.Errorf("finishedAt: %w", err)
	}
	if m.ResumeAt, err = parseTime(j.ResumeAt); err != nil {
		return m, fmt.Errorf("resumeAt: %w", err)
	}
	return m, nil
}

// jsonIntOrString reads a JSON number or string into an IntOrString.
type jsonIntOrString struct{ v *k.IntOrString }

func (j *jsonIntOrString) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		j.v = k.IntOrStringPtr(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a number or a string, got %s", b)
	}
	v := k.FromString(s)
	j.v = &v
	return nil
}

// jsonMetric describes the metric under test in a calls file.
type jsonMetric struct {
	Name                    string           `json:"name"`
	PluginKey               string           `json:"pluginKey"`
	Spec                    json.RawMessage  `json:"spec"`
	SpecRaw                 *string          `json:"specRaw"`
	SuccessCondition        string           `json:"successCondition"`
	FailureCondition        string           `json:"failureCondition"`
	Interval                string           `json:"interval"`
	InitialDelay            string           `json:"initialDelay"`
	Count                   *jsonIntOrString `json:"count"`
	FailureLimit            *jsonIntOrString `json:"failureLimit"`
	InconclusiveLimit       *jsonIntOrString `json:"inconclusiveLimit"`
	ConsecutiveErrorLimit   *jsonIntOrString `json:"consecutiveErrorLimit"`
	ConsecutiveSuccessLimit *jsonIntOrString `json:"consecutiveSuccessLimit"`
}

func ios(j *jsonIntOrString) *k.IntOrString {
	if j == nil {
		return nil
	}
	return j.v
}

func (j jsonMetric) metric() a.Metric {
	name := j.Name
	if name == "" {
		name = "rollgate"
	}
	key := j.PluginKey
	if key == "" {
		key = "rollgate/analysis"
	}
	spec := []byte(j.Spec)
	if j.SpecRaw != nil {
		spec = []byte(*j.SpecRaw)
	}
	return a.Metric{
		Name:                    name,
		Interval:                a.DurationString(j.Interval),
		InitialDelay:            a.DurationString(j.InitialDelay),
		Count:                   ios(j.Count),
		SuccessCondition:        j.SuccessCondition,
		FailureCondition:        j.FailureCondition,
		FailureLimit:            ios(j.FailureLimit),
		InconclusiveLimit:       ios(j.InconclusiveLimit),
		ConsecutiveErrorLimit:   ios(j.ConsecutiveErrorLimit),
		ConsecutiveSuccessLimit: ios(j.ConsecutiveSuccessLimit),
		Provider:                a.MetricProvider{Plugin: map[string]json.RawMessage{key: spec}},
	}
}
