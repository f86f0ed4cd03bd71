package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
)

// runIdentity names the AnalysisRun that wraps the metric under test.
type runIdentity struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

var defaultIdentity = runIdentity{
	Name:      "payments-6f7c9d8b5-7-2",
	Namespace: "payments",
	UID:       "4c1f5a7e-1b2d-4e8f-9a3c-7d6e5f4a3b21",
}

func ptr[T any](v T) *T { return &v }

// pluginMetric returns a metric whose provider is the plugin config spec under key.
func pluginMetric(name, key string, spec []byte) a.Metric {
	return a.Metric{
		Name:     name,
		Interval: "1m",
		Count:    k.IntOrStringPtr(5),
		Provider: a.MetricProvider{Plugin: map[string]json.RawMessage{key: json.RawMessage(spec)}},
	}
}

// buildRun wraps target in a full AnalysisRun as the controller holds it: owner reference to the
// Rollout, managed fields, args (plain, secret and field refs), three metrics (target, a built-in
// Prometheus metric and a dry-run Job metric with a deep PodSpec) and their previous
// measurements.
func buildRun(id runIdentity, target a.Metric, now time.Time) *a.AnalysisRun {
	created := now.Add(-6 * time.Minute).UTC().Truncate(time.Second)
	started := created.Add(2 * time.Second)
	rolloutUID := k.UID("9b2e8f1c-3d4a-4b5c-8e6f-0a1b2c3d4e5f")
	metrics := []a.Metric{target, prometheusMetric(), jobMetric(id.Namespace)}
	results := make([]a.MetricResult, 0, len(metrics))
	for i, m := range metrics {
		results = append(results, metricResult(m.Name, started, 3, i == 2))
	}
	fields := `{"f:metadata":{"f:labels":{".":{},"f:rollout-type":{},"f:rollouts-pod-template-hash":{},"f:step-index":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + string(rolloutUID) + `\"}":{}}},"f:spec":{".":{},"f:args":{},"f:metrics":{}}}`
	return &a.AnalysisRun{
		TypeMeta: k.TypeMeta{Kind: "AnalysisRun", APIVersion: "argoproj.io/v1alpha1"},
		ObjectMeta: k.ObjectMeta{
			Name:              id.Name,
			Namespace:         id.Namespace,
			UID:               k.UID(id.UID),
			ResourceVersion:   "48213977",
			Generation:        4,
			CreationTimestamp: k.NewTime(created),
			Labels: map[string]string{
				"rollout-type":               "Step",
				"rollouts-pod-template-hash": "6f7c9d8b5",
				"step-index":                 "2",
				"app.kubernetes.io/name":     "payments",
			},
			Annotations: map[string]string{
				"rollout.argoproj.io/revision":                                     "7",
				"notifications.argoproj.io/subscribe.on-analysis-run-failed.slack": "payments-alerts",
			},
			OwnerReferences: []k.OwnerReference{{
				APIVersion:         "argoproj.io/v1alpha1",
				Kind:               "Rollout",
				Name:               "payments",
				UID:                rolloutUID,
				Controller:         ptr(true),
				BlockOwnerDeletion: ptr(true),
			}},
			ManagedFields: []k.ManagedFieldsEntry{
				{Manager: "rollouts-controller", Operation: "Update", APIVersion: "argoproj.io/v1alpha1",
					Time: k.NewTimePtr(created), FieldsType: "FieldsV1", FieldsV1: &k.FieldsV1{Raw: []byte(fields)}},
				{Manager: "rollouts-controller", Operation: "Update", APIVersion: "argoproj.io/v1alpha1",
					Time: k.NewTimePtr(now.UTC().Truncate(time.Second)), FieldsType: "FieldsV1",
					FieldsV1:    &k.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:metricResults":{},"f:phase":{},"f:runSummary":{},"f:startedAt":{}}}`)},
					Subresource: "status"},
			},
		},
		Spec: a.AnalysisRunSpec{
			Metrics: metrics,
			Args: []a.Argument{
				{Name: "service-name", Value: ptr("payments")},
				{Name: "canary-hash", Value: ptr("6f7c9d8b5")},
				{Name: "api-token", ValueFrom: &a.ValueFrom{SecretKeyRef: &a.SecretKeyRef{Name: "prom-token", Key: "token"}}},
				{Name: "namespace", ValueFrom: &a.ValueFrom{FieldRef: &a.FieldRef{FieldPath: "metadata.namespace"}}},
			},
			DryRun:               []a.DryRun{{MetricName: "smoke-test"}},
			MeasurementRetention: []a.MeasurementRetention{{MetricName: target.Name, Limit: 20}},
			TTLStrategy:          &a.TTLStrategy{SecondsAfterCompletion: ptr(int32(86400))},
		},
		Status: a.AnalysisRunStatus{
			Phase:         a.AnalysisPhaseRunning,
			MetricResults: results,
			StartedAt:     k.NewTimePtr(started),
			RunSummary:    a.RunSummary{Count: 3, Successful: 2},
			DryRunSummary: &a.RunSummary{Count: 1, Successful: 1},
		},
	}
}

func metricResult(name string, started time.Time, n int, dryRun bool) a.MetricResult {
	r := a.MetricResult{Name: name, Phase: a.AnalysisPhaseRunning, DryRun: dryRun,
		Metadata: map[string]string{"ResolvedPrometheusQuery": "sum(rate(http_requests_total[5m]))"}}
	for i := 0; i < n; i++ {
		// Controller times are time.Now() in the local zone with nanoseconds.
		s := started.Add(time.Duration(i)*time.Minute + 123456789*time.Nanosecond).Local()
		r.Measurements = append(r.Measurements, a.Measurement{
			Phase:      a.AnalysisPhaseSuccessful,
			StartedAt:  k.NewTimePtr(s),
			FinishedAt: k.NewTimePtr(s.Add(87654321 * time.Nanosecond)),
			Value:      fmt.Sprintf("[0.99%d]", i),
			Metadata:   map[string]string{"metric": name},
		})
		r.Count++
		r.Successful++
		r.ConsecutiveSuccess++
	}
	return r
}

func prometheusMetric() a.Metric {
	return a.Metric{
		Name:             "success-rate",
		Interval:         "5m",
		InitialDelay:     "30s",
		Count:            k.IntOrStringPtr(3),
		SuccessCondition: "result[0] >= 0.95",
		FailureLimit:     ptr(k.FromString("2")),
		Provider: a.MetricProvider{Prometheus: &a.PrometheusMetric{
			Address: "http://prometheus.monitoring:9090",
			Query:   `sum(irate(istio_requests_total{reporter="source",destination_service=~"payments",response_code!~"5.*"}[5m])) / sum(irate(istio_requests_total{reporter="source",destination_service=~"payments"}[5m]))`,
			Authentication: a.Authentication{Sigv4: a.Sigv4Config{Region: "eu-west-1"},
				OAuth2: a.OAuth2Config{Scopes: []string{"read"}}},
			Timeout: ptr(int64(30)),
			Headers: []a.WebMetricHeader{{Key: "X-Scope-OrgID", Value: "payments"}},
		}},
	}
}

func jobMetric(ns string) a.Metric {
	labels := map[string]string{"app": "smoke-test", "rollouts-pod-template-hash": "6f7c9d8b5"}
	container := func(name string) k.Container {
		return k.Container{
			Name:    name,
			Image:   "registry.example.com/payments/smoke@sha256:4f1c0e9b8a7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b",
			Command: []string{"/bin/smoke"},
			Args:    []string{"--target", "http://payments-canary." + ns + ".svc:8080", "--requests", "200"},
			Ports:   []k.ContainerPort{{Name: "metrics", ContainerPort: 9102, Protocol: "TCP"}},
			Env: []k.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "TOKEN", ValueFrom: &k.EnvVarSource{SecretKeyRef: &k.SecretKeySelector{
					LocalObjectReference: k.LocalObjectReference{Name: "smoke-token"}, Key: "token", Optional: ptr(false)}}},
				{Name: "POD_NAME", ValueFrom: &k.EnvVarSource{FieldRef: &k.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			},
			Resources: k.ResourceRequirements{
				Limits:   k.ResourceList{"cpu": k.MustParseQuantity("500m"), "memory": k.MustParseQuantity("256Mi")},
				Requests: k.ResourceList{"cpu": k.MustParseQuantity("100m"), "memory": k.MustParseQuantity("64Mi")},
			},
			VolumeMounts: []k.VolumeMount{{Name: "config", MountPath: "/etc/smoke", ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
			LivenessProbe: &k.Probe{ProbeHandler: k.ProbeHandler{HTTPGet: &k.HTTPGetAction{Path: "/healthz", Port: k.FromInt(9102), Scheme: "HTTP",
				HTTPHeaders: []k.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}, PeriodSeconds: 10, FailureThreshold: 3},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: "File",
			ImagePullPolicy:          "IfNotPresent",
			SecurityContext: &k.SecurityContext{
				Capabilities:             &k.Capabilities{Drop: []k.Capability{"ALL"}},
				RunAsNonRoot:             ptr(true),
				ReadOnlyRootFilesystem:   ptr(true),
				AllowPrivilegeEscalation: ptr(false),
				SeccompProfile:           &k.SeccompProfile{Type: "RuntimeDefault"},
			},
		}
	}
	return a.Metric{
		Name:  "smoke-test",
		Count: k.IntOrStringPtr(1),
		Provider: a.MetricProvider{Job: &a.JobMetric{
			Metadata: k.ObjectMeta{Labels: labels, Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
			Spec: k.JobSpec{
				BackoffLimit:            ptr(int32(1)),
				ActiveDeadlineSeconds:   ptr(int64(300)),
				TTLSecondsAfterFinished: ptr(int32(600)),
				Template: k.PodTemplateSpec{
					ObjectMeta: k.ObjectMeta{Labels: labels},
					Spec: k.PodSpec{
						InitContainers: []k.Container{container("wait-for-canary")},
						Containers:     []k.Container{container("smoke")},
						Volumes: []k.Volume{
							{Name: "config", VolumeSource: k.VolumeSource{ConfigMap: &k.ConfigMapVolumeSource{
								LocalObjectReference: k.LocalObjectReference{Name: "smoke-config"},
								Items:                []k.KeyToPath{{Key: "smoke.yaml", Path: "smoke.yaml"}}, DefaultMode: ptr(int32(0o444))}}},
							{Name: "tmp", VolumeSource: k.VolumeSource{EmptyDir: &k.EmptyDirVolumeSource{Medium: "Memory", SizeLimit: ptr(k.MustParseQuantity("64Mi"))}}},
						},
						RestartPolicy:                 "Never",
						TerminationGracePeriodSeconds: ptr(int64(30)),
						DNSPolicy:                     "ClusterFirst",
						ServiceAccountName:            "smoke-test",
						SecurityContext:               &k.PodSecurityContext{RunAsUser: ptr(int64(65532)), FSGroup: ptr(int64(65532))},
						Affinity: &k.Affinity{
							NodeAffinity: &k.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &k.NodeSelector{
								NodeSelectorTerms: []k.NodeSelectorTerm{{MatchExpressions: []k.NodeSelectorRequirement{
									{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64", "arm64"}}}}}}},
							PodAntiAffinity: &k.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []k.WeightedPodAffinityTerm{{
								Weight: 100, PodAffinityTerm: k.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
									LabelSelector: &k.LabelSelector{MatchLabels: map[string]string{"app": "smoke-test"}}}}}},
						},
						Tolerations: []k.Toleration{{Key: "dedicated", Operator: "Equal", Value: "ci", Effect: "NoSchedule"}},
					},
				},
			},
		}},
	}
}

// padRun grows run until its gob encoding is at least size bytes: a quarter in annotations, the
// rest in previous measurements of the first metric.
func padRun(run *a.AnalysisRun, size int, encodedSize func(*a.AnalysisRun) int) int {
	note := strings.Repeat("x", 1000)
	for i := 0; encodedSize(run) < size/4 && i < 100000; i += 200 {
		for j := i; j < i+200; j++ {
			run.Annotations[fmt.Sprintf("example.com/note-%06d", j)] = note
		}
	}
	base := run.Status.MetricResults[0].Measurements[0]
	for n := encodedSize(run); n < size; n = encodedSize(run) {
		batch := (size - n) / 300
		if batch < 50 {
			batch = 50
		}
		for j := 0; j < batch; j++ {
			m := base
			m.Message = strings.Repeat("m", 120)
			m.Metadata = map[string]string{"metric": run.Spec.Metrics[0].Name, "seq": fmt.Sprint(j)}
			run.Status.MetricResults[0].Measurements = append(run.Status.MetricResults[0].Measurements, m)
		}
	}
	return encodedSize(run)
}
