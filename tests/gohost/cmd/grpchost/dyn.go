package main

import (
	"context"
	"fmt"
	"io/ioutil"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// serviceName is the service under test.
const serviceName = "rollgate.v1.MetricProviderService"

// dynCodec marshals dynamic (APIv2) messages and raw byte slices; grpc-go 1.33's default
// codec only knows the older protobuf API.
type dynCodec struct{}

func (dynCodec) Name() string { return "proto" }

func (dynCodec) Marshal(v interface{}) ([]byte, error) {
	switch m := v.(type) {
	case proto.Message:
		return proto.Marshal(m)
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("dynCodec: cannot marshal %T", v)
}

func (dynCodec) Unmarshal(data []byte, v interface{}) error {
	switch m := v.(type) {
	case proto.Message:
		return proto.Unmarshal(data, m)
	case *[]byte:
		*m = append((*m)[:0], data...)
		return nil
	}
	return fmt.Errorf("dynCodec: cannot unmarshal into %T", v)
}

// api resolves the methods of the service from a descriptor set.
type api struct {
	files   *protoregistry.Files
	service protoreflect.ServiceDescriptor
}

func loadAPI(path string) (*api, error) {
	raw, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d, err := files.FindDescriptorByName(serviceName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	svc, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", serviceName)
	}
	return &api{files: files, service: svc}, nil
}

func (a *api) method(name string) (protoreflect.MethodDescriptor, error) {
	m := a.service.Methods().ByName(protoreflect.Name(name))
	if m == nil {
		return nil, fmt.Errorf("no method %s.%s", serviceName, name)
	}
	return m, nil
}

// request builds the input message of method from protobuf JSON.
func (a *api) request(m protoreflect.MethodDescriptor, jsonText string) (*dynamicpb.Message, error) {
	msg := dynamicpb.NewMessage(m.Input())
	if strings.TrimSpace(jsonText) == "" {
		return msg, nil
	}
	if err := (protojson.UnmarshalOptions{Resolver: dynResolver{a.files}}).Unmarshal([]byte(jsonText), msg); err != nil {
		return nil, fmt.Errorf("request for %s: %w", m.Name(), err)
	}
	return msg, nil
}

// invoke calls method with req and returns the reply as protobuf JSON (proto field names).
func (a *api) invoke(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, req proto.Message) (string, *status.Status) {
	reply := dynamicpb.NewMessage(m.Output())
	path := "/" + serviceName + "/" + string(m.Name())
	err := conn.Invoke(ctx, path, req, reply, grpc.ForceCodec(dynCodec{}))
	if err != nil {
		return "", status.Convert(err)
	}
	out, merr := (protojson.MarshalOptions{UseProtoNames: true, Resolver: dynResolver{a.files}}).Marshal(reply)
	if merr != nil {
		return "", status.New(2, "grpchost: cannot print the reply: "+merr.Error())
	}
	return string(out), nil
}

// invokeRaw calls any method with a raw encoded request and returns the raw reply.
func invokeRaw(ctx context.Context, conn *grpc.ClientConn, path string, req []byte) ([]byte, error) {
	var reply []byte
	err := conn.Invoke(ctx, path, &req, &reply, grpc.ForceCodec(dynCodec{}))
	return reply, err
}

// dynResolver lets protojson find message types (for Any) in the loaded files only.
type dynResolver struct{ files *protoregistry.Files }

func (r dynResolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	d, err := r.files.FindDescriptorByName(name)
	if err != nil {
		return nil, err
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, protoregistry.NotFound
	}
	return dynamicpb.NewMessageType(md), nil
}

func (r dynResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	name := url
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		name = url[i+1:]
	}
	return r.FindMessageByName(protoreflect.FullName(name))
}

func (r dynResolver) FindExtensionByName(protoreflect.FullName) (protoreflect.ExtensionType, error) {
	return nil, protoregistry.NotFound
}

func (r dynResolver) FindExtensionByNumber(protoreflect.FullName, protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	return nil, protoregistry.NotFound
}

// forceDyn is the call option that selects dynCodec.
func forceDyn() grpc.CallOption { return grpc.ForceCodec(dynCodec{}) }
