package pluginrpc

import (
	"encoding/gob"

	"rollgate.test/gohost/argotypes/v1alpha1"
)

// RpcError mirrors utils/plugin/types.RpcError: an empty ErrorString means no error.
type RpcError struct {
	ErrorString string
}

func (e RpcError) Error() string { return e.ErrorString }

// RunArgs is the argument of Plugin.Run (metricproviders/plugin/rpc.RunArgs).
type RunArgs struct {
	AnalysisRun *v1alpha1.AnalysisRun
	Metric      v1alpha1.Metric
}

// TerminateAndResumeArgs is the argument of Plugin.Resume and Plugin.Terminate.
type TerminateAndResumeArgs struct {
	AnalysisRun *v1alpha1.AnalysisRun
	Metric      v1alpha1.Metric
	Measurement v1alpha1.Measurement
}

// GarbageCollectArgs is the argument of Plugin.GarbageCollect.
type GarbageCollectArgs struct {
	AnalysisRun *v1alpha1.AnalysisRun
	Metric      v1alpha1.Metric
	Limit       int
}

// GetMetadataArgs is the argument of Plugin.GetMetadata.
type GetMetadataArgs struct {
	Metric v1alpha1.Metric
}

// The controller registers these names; an interface value on the wire carries the name.
func init() {
	gob.RegisterName("RpcError", new(RpcError))
	gob.RegisterName("RunArgs", new(RunArgs))
	gob.RegisterName("TerminateAndResumeArgs", new(TerminateAndResumeArgs))
	gob.RegisterName("GarbageCollectArgs", new(GarbageCollectArgs))
	gob.RegisterName("GetMetadataArgs", new(GetMetadataArgs))
}
