package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"math/big"
	"net"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"rollgate.test/gohost/hostkit"
)

// callSpec is one call of the -calls file: a method of rollgate.v1.MetricProviderService and
// its request as protobuf JSON.
type callSpec struct {
	Method    string          `json:"method"`
	Request   json.RawMessage `json:"request"`
	TimeoutMs int             `json:"timeoutMs"`
}

// callResult is what one call returned: the status code and message, and the reply as protobuf
// JSON (proto field names) when the code is OK.
type callResult struct {
	Index     int             `json:"index"`
	Method    string          `json:"method"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Response  json.RawMessage `json:"response"`
	ElapsedMs float64         `json:"elapsedMs"`
}

type checkResult struct {
	OK       bool         `json:"ok"`
	Protocol string       `json:"protocol"`
	MTLS     bool         `json:"mtls"`
	Checks   []check      `json:"checks"`
	Calls    []callResult `json:"calls"`
}

func cmdCheck(args []string) int {
	fs, c := newFlagSet("check")
	mtls := fs.Bool("mtls", true, "use go-plugin's AutoMTLS")
	callsPath := fs.String("calls", "", "JSON list of calls to make (optional)")
	exitLimit := fs.Duration("exit-limit", 2*time.Second, "the plugin must exit within this long after Shutdown")
	if !c.Parse(args) {
		return hostkit.ExitSetup
	}
	a, err := loadAPI(c.descriptor)
	if err != nil {
		return c.SetupErr(err)
	}
	var calls []callSpec
	if *callsPath != "" {
		raw, err := ioutil.ReadFile(*callsPath)
		if err != nil {
			return c.SetupErr(err)
		}
		if err := json.Unmarshal(raw, &calls); err != nil {
			return c.SetupErr(fmt.Errorf("%s: %w", *callsPath, err))
		}
	}
	s, err := launch(c, []plugin.Protocol{plugin.ProtocolNetRPC, plugin.ProtocolGRPC}, *mtls)
	if err != nil {
		return c.SetupErr(err)
	}
	defer s.client.Kill()
	var cl checklist
	res := checkResult{Protocol: string(s.client.Protocol()), MTLS: *mtls}
	cl.add("handshake: gRPC negotiated", s.client.Protocol() == plugin.ProtocolGRPC && s.conn != nil,
		"protocol %q, app version %d", s.client.Protocol(), s.client.NegotiatedVersion())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.proto.Ping()
	cl.add("health: go-plugin Ping", err == nil, "error %v", err)
	health := grpc_health_v1.NewHealthClient(s.conn)
	for _, svc := range []string{"plugin", serviceName} {
		r, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: svc})
		cl.add("health: "+svc+" SERVING", err == nil && r.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING,
			"status %v, error %v", r.GetStatus(), err)
	}
	_, err = health.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "no-such-service"})
	cl.add("health: unknown service NOT_FOUND", status.Code(err) == codes.NotFound, "error %v", err)

	if addr := s.client.ReattachConfig(); addr != nil && *mtls {
		err := dialAndCheck(addr.Addr, nil)
		cl.add("AutoMTLS: plaintext connection refused", err != nil, "health check error: %v", err)
		own, oerr := selfSignedCert()
		if oerr != nil {
			cl.add("AutoMTLS: unknown client certificate refused", false, "making a certificate: %v", oerr)
		} else {
			err = dialAndCheck(addr.Addr, &tls.Config{Certificates: []tls.Certificate{own}, InsecureSkipVerify: true, ServerName: "localhost"})
			cl.add("AutoMTLS: unknown client certificate refused", err != nil, "health check error: %v", err)
			err = dialAndCheck(addr.Addr, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
			cl.add("AutoMTLS: no client certificate refused", err != nil, "health check error: %v", err)
		}
	}

	stdioDone, stdioChunks := openStream(s.conn, "/plugin.GRPCStdio/StreamStdio", &grpc.StreamDesc{ServerStreams: true}, true)
	brokerDone, brokerMsgs := openStream(s.conn, "/plugin.GRPCBroker/StartStream", &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, false)
	select {
	case err := <-stdioDone:
		cl.add("stdio: StreamStdio stays open", false, "ended at once: %v", err)
	case err := <-brokerDone:
		cl.add("broker: StartStream stays open", false, "ended at once: %v", err)
	case <-time.After(300 * time.Millisecond):
		cl.add("stdio: StreamStdio stays open", true, "open after 300 ms")
		cl.add("broker: StartStream stays open", true, "open after 300 ms")
	}

	for i, call := range calls {
		res.Calls = append(res.Calls, doCall(a, s.conn, i, call))
	}

	t := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = invokeRaw(sctx, s.conn, "/plugin.GRPCController/Shutdown", nil)
	scancel()
	cl.add("controller: Shutdown answered", err == nil, "error %v", err)
	exited := false
	for time.Since(t) < *exitLimit {
		if !procAlive(s.pid) {
			exited = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl.add("controller: plugin exited after Shutdown", exited, "pid %d gone: %v after %s", s.pid, exited, time.Since(t).Round(time.Millisecond))
	for _, st := range []struct {
		name  string
		done  <-chan error
		count *int
	}{{"stdio: StreamStdio ended at shutdown", stdioDone, stdioChunks}, {"broker: StartStream ended at shutdown", brokerDone, brokerMsgs}} {
		select {
		case err := <-st.done:
			cl.add(st.name, *st.count == 0, "ended with %v after %d messages", err, *st.count)
		case <-time.After(time.Second):
			cl.add(st.name, false, "still open a second after the plugin exited")
		}
	}

	// go-plugin's own Kill(): GRPCController/Shutdown, close, wait up to 2 s, then SIGKILL.
	if s2, err := launch(c, []plugin.Protocol{plugin.ProtocolGRPC}, *mtls); err != nil {
		cl.add("go-plugin Kill: clean exit", false, "launch: %v", err)
	} else {
		perr := s2.proto.Ping()
		t := time.Now()
		s2.client.Kill()
		el := time.Since(t)
		gone := !procAlive(s2.pid)
		cl.add("go-plugin Kill: clean exit", perr == nil && gone && el < 1900*time.Millisecond,
			"Ping error %v; Kill took %s (go-plugin force-kills after 2 s); exited %v", perr, el.Round(time.Millisecond), gone)
	}

	res.Checks = cl.checks
	failed := cl.failed()
	res.OK = len(failed) == 0
	c.Emit(res)
	if !res.OK {
		return c.Failf("failed: %v", failed)
	}
	return 0
}

// doCall makes one call of the -calls file.
func doCall(a *api, conn *grpc.ClientConn, i int, call callSpec) callResult {
	r := callResult{Index: i, Method: call.Method, Response: json.RawMessage("null")}
	m, err := a.method(call.Method)
	if err != nil {
		r.Code, r.Message = "GRPCHOST_ERROR", err.Error()
		return r
	}
	req, err := a.request(m, string(call.Request))
	if err != nil {
		r.Code, r.Message = "GRPCHOST_ERROR", err.Error()
		return r
	}
	timeout := 30 * time.Second
	if call.TimeoutMs > 0 {
		timeout = time.Duration(call.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t := time.Now()
	out, st := a.invoke(ctx, conn, m, req)
	r.ElapsedMs = hostkit.Ms(time.Since(t))
	if st != nil {
		r.Code, r.Message = st.Code().String(), st.Message()
		return r
	}
	r.Code = codes.OK.String()
	r.Response = json.RawMessage(out)
	return r
}

// openStream opens a streaming call with an empty first message (for server streams) and
// reads it on a goroutine: the channel gets the error that ended it; count the messages read.
func openStream(conn *grpc.ClientConn, path string, desc *grpc.StreamDesc, sendEmpty bool) (<-chan error, *int) {
	done := make(chan error, 1)
	count := new(int)
	stream, err := conn.NewStream(context.Background(), desc, path, grpc.ForceCodec(dynCodec{}))
	if err != nil {
		done <- err
		return done, count
	}
	if sendEmpty {
		empty := []byte{}
		if err := stream.SendMsg(&empty); err != nil {
			done <- err
			return done, count
		}
		if err := stream.CloseSend(); err != nil {
			done <- err
			return done, count
		}
	}
	go func() {
		for {
			var b []byte
			if err := stream.RecvMsg(&b); err != nil {
				done <- err
				return
			}
			*count++
		}
	}()
	return done, count
}

// dialAndCheck connects to the plugin's socket on a fresh connection (plaintext when cfg is
// nil) and makes one health check.
func dialAndCheck(addr net.Addr, cfg *tls.Config) error {
	dialer := func(_ string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout(addr.Network(), addr.String(), timeout)
	}
	opts := []grpc.DialOption{grpc.WithDialer(dialer)}
	if cfg == nil {
		opts = append(opts, grpc.WithInsecure())
	} else {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	conn, err := grpc.Dial("unused", opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
	return err
}

// selfSignedCert makes a client certificate the plugin has never seen.
func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
