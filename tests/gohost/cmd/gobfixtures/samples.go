package main

import (
	"encoding/json"
	"fmt"
	"time"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
)

// The values are fixed (no clock, no randomness) so the fixtures mean the same on every run;
// only Go's map order changes the bytes.

func ptr[T any](v T) *T { return &v }

// at is a fixed UTC instant with nanoseconds, so times round-trip visibly.
func at(sec, nsec int64) *k.Time { return k.NewTimePtr(time.Unix(sec, nsec).UTC()) }

func intVal(i int) *k.IntOrString { return k.IntOrStringPtr(i) }

func strVal(s string) *k.IntOrString { v := k.FromString(s); return &v }

// pluginMetric is a metric for the rollgate plugin, as the controller passes it to Run.
func pluginMetric(name string) a.Metric {
	return a.Metric{
		Name:                  name,
		Interval:              "1m",
		InitialDelay:          "30s",
		Count:                 intVal(5),
		SuccessCondition:      "result[0] < 0.01",
		FailureCondition:      "result[0] > 0.05",
		FailureLimit:          strVal("50%"),
		InconclusiveLimit:     intVal(0),
		ConsecutiveErrorLimit: intVal(4),
		Provider: a.MetricProvider{
			Plugin: map[string]json.RawMessage{
				"argoproj-labs/rollgate": json.RawMessage(`{"query":"sum(rate(errors[5m]))","address":"http://prometheus:9090"}`),
			},
		},
	}
}

// sampleJobMetric is a Job-provider metric with a realistically full pod template: its type
// tree is the deepest the controller sends.
func sampleJobMetric() a.Metric {
	podSpec := k.PodSpec{
		Volumes: []k.Volume{
			{Name: "config", VolumeSource: k.VolumeSource{ConfigMap: &k.ConfigMapVolumeSource{
				LocalObjectReference: k.LocalObjectReference{Name: "load-test"},
				Items:                []k.KeyToPath{{Key: "k6.js", Path: "k6.js", Mode: ptr(int32(0o444))}},
			}}},
			{Name: "token", VolumeSource: k.VolumeSource{Projected: &k.ProjectedVolumeSource{Sources: []k.VolumeProjection{
				{ServiceAccountToken: &k.ServiceAccountTokenProjection{Audience: "api", ExpirationSeconds: ptr(int64(3600)), Path: "token"}},
				{DownwardAPI: &k.DownwardAPIProjection{Items: []k.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &k.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}},
			}}}},
			{Name: "scratch", VolumeSource: k.VolumeSource{Ephemeral: &k.EphemeralVolumeSource{VolumeClaimTemplate: &k.PersistentVolumeClaimTemplate{
				ObjectMeta: k.ObjectMeta{Labels: map[string]string{"app": "load"}},
				Spec: k.PersistentVolumeClaimSpec{
					AccessModes: []k.PersistentVolumeAccessMode{"ReadWriteOnce"},
					Resources:   k.VolumeResourceRequirements{Requests: k.ResourceList{"storage": k.MustParseQuantity("1Gi")}},
				},
			}}}},
		},
		Containers: []k.Container{{
			Name:    "k6",
			Image:   "grafana/k6:0.50.0",
			Command: []string{"k6", "run", "/config/k6.js"},
			Env: []k.EnvVar{
				{Name: "TARGET", Value: "http://checkout-canary"},
				{Name: "POD", ValueFrom: &k.EnvVarSource{FieldRef: &k.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "TOKEN", ValueFrom: &k.EnvVarSource{SecretKeyRef: &k.SecretKeySelector{LocalObjectReference: k.LocalObjectReference{Name: "k6"}, Key: "token"}}},
			},
			Resources: k.ResourceRequirements{
				Limits:   k.ResourceList{"cpu": k.MustParseQuantity("500m"), "memory": k.MustParseQuantity("256Mi")},
				Requests: k.ResourceList{"cpu": k.MustParseQuantity("100m")},
			},
			VolumeMounts: []k.VolumeMount{{Name: "config", MountPath: "/config", ReadOnly: true}},
			ReadinessProbe: &k.Probe{
				ProbeHandler:  k.ProbeHandler{HTTPGet: &k.HTTPGetAction{Path: "/healthz", Port: k.FromString("http"), HTTPHeaders: []k.HTTPHeader{{Name: "X", Value: "1"}}}},
				PeriodSeconds: 5,
			},
			Lifecycle: &k.Lifecycle{PreStop: &k.LifecycleHandler{Sleep: &k.SleepAction{Seconds: 3}}},
			SecurityContext: &k.SecurityContext{
				Capabilities:           &k.Capabilities{Drop: []k.Capability{"ALL"}},
				RunAsNonRoot:           ptr(true),
				ReadOnlyRootFilesystem: ptr(true),
				SeccompProfile:         &k.SeccompProfile{Type: "RuntimeDefault"},
			},
		}},
		RestartPolicy: "Never",
		Affinity: &k.Affinity{
			NodeAffinity: &k.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &k.NodeSelector{NodeSelectorTerms: []k.NodeSelectorTerm{
				{MatchExpressions: []k.NodeSelectorRequirement{{Key: "pool", Operator: "In", Values: []string{"batch", "spot"}}}},
			}}},
			PodAntiAffinity: &k.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []k.WeightedPodAffinityTerm{{
				Weight: 50,
				PodAffinityTerm: k.PodAffinityTerm{
					LabelSelector: &k.LabelSelector{MatchExpressions: []k.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: []string{"k6"}}}},
					TopologyKey:   "kubernetes.io/hostname",
				},
			}}},
		},
		Tolerations:     []k.Toleration{{Key: "spot", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: ptr(int64(60))}},
		SecurityContext: &k.PodSecurityContext{FSGroup: ptr(int64(2000)), Sysctls: []k.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}},
		NodeSelector:    map[string]string{"kubernetes.io/os": "linux"},
	}
	return a.Metric{
		Name:  "load-test",
		Count: intVal(1),
		Provider: a.MetricProvider{Job: &a.JobMetric{
			Metadata: k.ObjectMeta{Labels: map[string]string{"job": "load"}},
			Spec: k.JobSpec{
				BackoffLimit: ptr(int32(0)),
				PodFailurePolicy: &k.PodFailurePolicy{Rules: []k.PodFailurePolicyRule{{
					Action:      "FailJob",
					OnExitCodes: &k.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{1, 2}},
				}}},
				Template: k.PodTemplateSpec{
					ObjectMeta: k.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
					Spec:       podSpec,
				},
			},
		}},
	}
}

// sampleRun is a full AnalysisRun as the controller holds it mid-analysis.
func sampleRun(name string) *a.AnalysisRun {
	base := int64(1_704_164_000)
	meas := func(i int64, phase a.AnalysisPhase) a.Measurement {
		return a.Measurement{
			Phase:      phase,
			Message:    fmt.Sprintf("measurement %d", i),
			StartedAt:  at(base+60*i, 111_000_000*i),
			FinishedAt: at(base+60*i+2, 0),
			Value:      fmt.Sprintf("[0.00%d]", i),
			Metadata:   map[string]string{"query": "sum(rate(errors[5m]))", "samples": fmt.Sprint(10 * i)},
		}
	}
	svc := "checkout"
	return &a.AnalysisRun{
		TypeMeta: k.TypeMeta{Kind: "AnalysisRun", APIVersion: "argoproj.io/v1alpha1"},
		ObjectMeta: k.ObjectMeta{
			Name:              name,
			Namespace:         "prod",
			UID:               k.UID("6f1c2b9e-1d2e-4c5b-9a7f-" + name),
			ResourceVersion:   "987654",
			Generation:        3,
			CreationTimestamp: *at(base, 0),
			Labels:            map[string]string{"rollouts-pod-template-hash": "7d9f8c6b5", "app": "checkout"},
			Annotations:       map[string]string{"rollout.argoproj.io/revision": "12"},
			OwnerReferences: []k.OwnerReference{{
				APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "checkout",
				UID: "0a1b2c3d", Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
			ManagedFields: []k.ManagedFieldsEntry{
				{Manager: "rollouts-controller", Operation: "Update", APIVersion: "argoproj.io/v1alpha1", Time: at(base, 5), FieldsType: "FieldsV1",
					FieldsV1: &k.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:metrics":{}}}`)}},
				{Manager: "rollouts-controller", Operation: "Update", APIVersion: "argoproj.io/v1alpha1", Time: at(base+120, 7), FieldsType: "FieldsV1",
					FieldsV1: &k.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:metricResults":{},"f:phase":{},"f:startedAt":{}}}`)}, Subresource: "status"},
			},
		},
		Spec: a.AnalysisRunSpec{
			Metrics: []a.Metric{pluginMetric("error-rate"), sampleJobMetric()},
			Args: []a.Argument{
				{Name: "service", Value: &svc},
				{Name: "token", ValueFrom: &a.ValueFrom{SecretKeyRef: &a.SecretKeyRef{Name: "prom", Key: "token"}}},
				{Name: "pod", ValueFrom: &a.ValueFrom{FieldRef: &a.FieldRef{FieldPath: "metadata.name"}}},
			},
			DryRun:               []a.DryRun{{MetricName: "load-test"}},
			MeasurementRetention: []a.MeasurementRetention{{MetricName: "error-rate", Limit: 20}},
			TTLStrategy:          &a.TTLStrategy{SecondsAfterCompletion: ptr(int32(3600))},
		},
		Status: a.AnalysisRunStatus{
			Phase: "Running",
			MetricResults: []a.MetricResult{
				{Name: "error-rate", Phase: "Running", Measurements: []a.Measurement{meas(1, "Successful"), meas(2, "Successful"), meas(3, "Successful")},
					Count: 3, Successful: 3, Metadata: map[string]string{"k": "v"}},
				{Name: "load-test", Phase: "Running", Measurements: []a.Measurement{{Phase: "Running", StartedAt: at(base, 0), ResumeAt: at(base+30, 0)}}, Count: 1, DryRun: true},
			},
			StartedAt:  at(base, 0),
			RunSummary: a.RunSummary{Count: 2},
		},
	}
}
