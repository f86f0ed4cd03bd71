// Package v1alpha1 holds copies of the Argo Rollouts analysis types
// (pkg/apis/rollouts/v1alpha1/analysis_types.go) with the controller's type names, field names
// and field types, in a package with the original's name, so that gob puts the same type
// definitions and values on the wire (gob spells unnamed composite types with the package name,
// e.g. "[]v1alpha1.Metric").
package v1alpha1

import (
	"encoding/json"

	metav1 "rollgate.test/gohost/argotypes/v1"
)

// DurationString is a Go duration such as "1m".
type DurationString string

// AnalysisPhase is the phase of a run, metric result or measurement.
type AnalysisPhase string

// Analysis phases.
const (
	AnalysisPhasePending      AnalysisPhase = "Pending"
	AnalysisPhaseRunning      AnalysisPhase = "Running"
	AnalysisPhaseSuccessful   AnalysisPhase = "Successful"
	AnalysisPhaseFailed       AnalysisPhase = "Failed"
	AnalysisPhaseError        AnalysisPhase = "Error"
	AnalysisPhaseInconclusive AnalysisPhase = "Inconclusive"
)

type AnalysisRun struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   AnalysisRunSpec
	Status AnalysisRunStatus
}

type AnalysisRunSpec struct {
	Metrics              []Metric
	Args                 []Argument
	Terminate            bool
	DryRun               []DryRun
	MeasurementRetention []MeasurementRetention
	TTLStrategy          *TTLStrategy
}

type AnalysisRunStatus struct {
	Phase         AnalysisPhase
	Message       string
	MetricResults []MetricResult
	StartedAt     *metav1.Time
	RunSummary    RunSummary
	DryRunSummary *RunSummary
	CompletedAt   *metav1.Time
}

type RunSummary struct {
	Count        int32
	Successful   int32
	Failed       int32
	Inconclusive int32
	Error        int32
}

type MetricResult struct {
	Name               string
	Phase              AnalysisPhase
	Measurements       []Measurement
	Message            string
	Count              int32
	Successful         int32
	Failed             int32
	Inconclusive       int32
	Error              int32
	ConsecutiveError   int32
	DryRun             bool
	Metadata           map[string]string
	ConsecutiveSuccess int32
}

type Measurement struct {
	Phase      AnalysisPhase
	Message    string
	StartedAt  *metav1.Time
	FinishedAt *metav1.Time
	Value      string
	Metadata   map[string]string
	ResumeAt   *metav1.Time
}

type Argument struct {
	Name      string
	Value     *string
	ValueFrom *ValueFrom
}

type ValueFrom struct {
	SecretKeyRef *SecretKeyRef
	FieldRef     *FieldRef
}

type SecretKeyRef struct {
	Name string
	Key  string
}

type FieldRef struct {
	FieldPath string
}

type DryRun struct {
	MetricName string
}

type MeasurementRetention struct {
	MetricName string
	Limit      int32
}

type TTLStrategy struct {
	SecondsAfterCompletion *int32
	SecondsAfterFailure    *int32
	SecondsAfterSuccess    *int32
}

type Metric struct {
	Name                    string
	Interval                DurationString
	InitialDelay            DurationString
	Count                   *metav1.IntOrString
	SuccessCondition        string
	FailureCondition        string
	FailureLimit            *metav1.IntOrString
	InconclusiveLimit       *metav1.IntOrString
	ConsecutiveErrorLimit   *metav1.IntOrString
	Provider                MetricProvider
	ConsecutiveSuccessLimit *metav1.IntOrString
}

type MetricProvider struct {
	Prometheus *PrometheusMetric
	Kayenta    *KayentaMetric
	Web        *WebMetric
	Datadog    *DatadogMetric
	Wavefront  *WavefrontMetric
	NewRelic   *NewRelicMetric
	Job        *JobMetric
	CloudWatch *CloudWatchMetric
	Graphite   *GraphiteMetric
	Influxdb   *InfluxdbMetric
	SkyWalking *SkyWalkingMetric
	Plugin     map[string]json.RawMessage
}

type PrometheusRangeQueryArgs struct {
	Start string
	End   string
	Step  DurationString
}

type PrometheusMetric struct {
	Address        string
	Query          string
	Authentication Authentication
	Timeout        *int64
	Insecure       bool
	Headers        []WebMetricHeader
	RangeQuery     *PrometheusRangeQueryArgs
}

type Authentication struct {
	Sigv4     Sigv4Config
	OAuth2    OAuth2Config
	BasicAuth BasicAuthConfig
}

type OAuth2Config struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
}

type Sigv4Config struct {
	Region  string
	Profile string
	RoleARN string
}

type BasicAuthConfig struct {
	Username string
	Password string
}

type WavefrontMetric struct {
	Address string
	Query   string
}

type NewRelicMetric struct {
	Profile string
	Query   string
	Timeout *int64
}

type JobMetric struct {
	Metadata metav1.ObjectMeta
	Spec     metav1.JobSpec
}

type GraphiteMetric struct {
	Address string
	Query   string
}

type InfluxdbMetric struct {
	Profile string
	Query   string
}

type CloudWatchMetric struct {
	Interval          DurationString
	MetricDataQueries []CloudWatchMetricDataQuery
}

type CloudWatchMetricDataQuery struct {
	Id         string
	Expression *string
	Label      *string
	MetricStat *CloudWatchMetricStat
	Period     *metav1.IntOrString
	ReturnData *bool
}

type CloudWatchMetricStat struct {
	Metric CloudWatchMetricStatMetric
	Period metav1.IntOrString
	Stat   string
	Unit   string
}

type CloudWatchMetricStatMetric struct {
	Dimensions []CloudWatchMetricStatMetricDimension
	MetricName string
	Namespace  *string
}

type CloudWatchMetricStatMetricDimension struct {
	Name  string
	Value string
}

type SkyWalkingMetric struct {
	Address  string
	Query    string
	Interval DurationString
}

type KayentaMetric struct {
	Address                  string
	Application              string
	CanaryConfigName         string
	MetricsAccountName       string
	ConfigurationAccountName string
	StorageAccountName       string
	Threshold                KayentaThreshold
	Scopes                   []KayentaScope
	Lookback                 bool
}

type KayentaThreshold struct {
	Pass     int64
	Marginal int64
}

type KayentaScope struct {
	Name            string
	ControlScope    ScopeDetail
	ExperimentScope ScopeDetail
}

type ScopeDetail struct {
	Scope  string
	Region string
	Step   int64
	Start  string
	End    string
}

type WebMetricMethod string

type WebMetric struct {
	Method         WebMetricMethod
	URL            string
	Headers        []WebMetricHeader
	Body           string
	TimeoutSeconds int64
	JSONPath       string
	Insecure       bool
	JSONBody       json.RawMessage
	Authentication Authentication
}

type WebMetricHeader struct {
	Key   string
	Value string
}

type DatadogMetric struct {
	Interval       DurationString
	Query          string
	Queries        map[string]string
	Formula        string
	ApiVersion     string
	Aggregator     string
	SecretRef      SecretRef
	RequestTimeout DurationString
}

type SecretRef struct {
	Name       string
	Namespaced bool
}
