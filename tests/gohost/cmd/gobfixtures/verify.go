package main

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"io"
	"net/rpc"
	"os"
	"reflect"

	k "rollgate.test/gohost/argotypes/v1"
	a "rollgate.test/gohost/argotypes/v1alpha1"
	"rollgate.test/gohost/pluginrpc"
)

// verify-replies: the replies rollgate's encoder writes (tests/fixtures/goplugin/rust_replies.bin,
// produced by rust_replies() in src/goplugin/fixture_tests.rs).

type expectedReply struct {
	seq    uint64
	method string
	err    string
	body   interface{} // the decoded body expected; nil when err is set
}

// rustRepliesExpected must list the same replies, in the same order, as rust_replies().
func rustRepliesExpected() []expectedReply {
	return []expectedReply{
		{1, "Plugin.Run", "", a.Measurement{Phase: "Successful", Message: "ok", Value: "0.5",
			Metadata: map[string]string{"a": "1", "b": "2"}, StartedAt: at(1_704_164_645, 123_456_789), FinishedAt: at(1_704_164_646, 623_456_789)}},
		{2, "Plugin.Run", "", a.Measurement{Phase: "Running", StartedAt: at(1_704_164_645, 123_456_789), ResumeAt: at(1_704_164_675, 0)}},
		{3, "Plugin.InitPlugin", "", pluginrpc.RpcError{}},
		{4, "Plugin.GarbageCollect", "", pluginrpc.RpcError{ErrorString: "negative limit -1"}},
		{5, "Plugin.Type", "", "RollgateTrivial"},
		{6, "Plugin.GetMetadata", "", map[string]string{"metric": "error-rate"}},
		{7, "Plugin.Nope", "rpc: can't find method Plugin.Nope", nil},
		{8, "Dispenser.Dispense", "", uint32(1)},
		{9, "Control.Ping", "", struct{}{}},
		// A zero StartedAt: Go's zero time, which gob omits and decodes back to nil.
		{10, "Plugin.Run", "", a.Measurement{Phase: "Error", Message: "rollgate panicked: boom", FinishedAt: at(1_704_164_646, 0)}},
		{11, "Plugin.GetMetadata", "", map[string]string{}},
	}
}

func timesEqual(x, y *k.Time) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	return x.Equal(y.Time)
}

func sameMeasurement(x, y a.Measurement) bool {
	if len(x.Metadata) == 0 && len(y.Metadata) == 0 {
		x.Metadata, y.Metadata = nil, nil
	}
	return x.Phase == y.Phase && x.Message == y.Message && x.Value == y.Value &&
		reflect.DeepEqual(x.Metadata, y.Metadata) && timesEqual(x.StartedAt, y.StartedAt) &&
		timesEqual(x.FinishedAt, y.FinishedAt) && timesEqual(x.ResumeAt, y.ResumeAt)
}

// decodeBody decodes one reply body into the Go type the controller would use for it and
// compares it with want.
func decodeBody(dec *gob.Decoder, want interface{}) error {
	var got interface{}
	var err error
	switch w := want.(type) {
	case a.Measurement:
		var m a.Measurement
		if err = dec.Decode(&m); err == nil && !sameMeasurement(m, w) {
			return fmt.Errorf("got %+v, want %+v", m, w)
		}
		return err
	case pluginrpc.RpcError:
		var e pluginrpc.RpcError
		err = dec.Decode(&e)
		got = e
	case string:
		var s string
		err = dec.Decode(&s)
		got = s
	case map[string]string:
		var m map[string]string
		err = dec.Decode(&m)
		if err == nil && len(m) == 0 && len(w) == 0 {
			m = w
		}
		got = m
	case uint32:
		var u uint32
		err = dec.Decode(&u)
		got = u
	case struct{}:
		var e struct{}
		err = dec.Decode(&e)
		got = e
	default:
		return fmt.Errorf("no decoder for %T", want)
	}
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("got %#v, want %#v", got, want)
	}
	return nil
}

func verifyReplies(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := gob.NewDecoder(bytes.NewReader(data))
	expected := rustRepliesExpected()
	for _, want := range expected {
		var resp rpc.Response
		if err := dec.Decode(&resp); err != nil {
			return fmt.Errorf("seq %d header: %v", want.seq, err)
		}
		if resp.Seq != want.seq || resp.ServiceMethod != want.method || resp.Error != want.err {
			return fmt.Errorf("header %+v, want seq %d %s %q", resp, want.seq, want.method, want.err)
		}
		if want.err != "" {
			// net/rpc's client discards the body of an error reply.
			if err := dec.DecodeValue(reflect.Value{}); err != nil {
				return fmt.Errorf("seq %d error body: %v", want.seq, err)
			}
			continue
		}
		if err := decodeBody(dec, want.body); err != nil {
			return fmt.Errorf("seq %d %s body: %v", want.seq, want.method, err)
		}
	}
	var extra rpc.Response
	if err := dec.Decode(&extra); err != io.EOF {
		return fmt.Errorf("trailing data after the expected replies: %v %+v", err, extra)
	}
	fmt.Println("verify-replies: OK,", len(expected), "replies decoded by Go's gob as expected")
	return nil
}
