// Command gobfixtures writes the gob fixtures that rollgate's go-plugin unit tests
// (src/goplugin/fixture_tests.rs) read, using Go's own encoding/gob and net/rpc with the
// controller's types from rollgate.test/gohost/argotypes, and checks rollgate's encoded replies
// with Go's decoder.
//
//	gobfixtures fixtures DIR             write *.bin streams and their expected *.json into DIR
//	gobfixtures verify-replies FILE      decode rollgate's reply stream as a net/rpc client would
package main

import (
	"bytes"
	"fmt"
	"net/rpc"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gobfixtures fixtures DIR | gobfixtures verify-replies FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fixtures":
		err = fixtures(os.Args[2])
	case "verify-replies":
		err = verifyReplies(os.Args[2])
	default:
		fmt.Fprintf(os.Stderr, "gobfixtures: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobfixtures:", err)
		os.Exit(1)
	}
}

// capture is a connection that records what a net/rpc client writes and never answers.
type capture struct{ bytes.Buffer }

func (c *capture) Read(p []byte) (int, error) { select {} }
func (c *capture) Close() error               { return nil }

// recorder sends calls on a net/rpc client over a capture. rpc.Client.Go writes the request
// before it returns, so the bytes are complete without waiting; a write error completes the
// call at once and is reported.
type recorder struct {
	conn   *capture
	client *rpc.Client
	err    error
}

func newRecorder() *recorder {
	conn := &capture{}
	return &recorder{conn: conn, client: rpc.NewClient(conn)}
}

func (r *recorder) send(method string, args, reply interface{}) {
	call := r.client.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case done := <-call.Done:
		if r.err == nil {
			r.err = fmt.Errorf("%s: %v", method, done.Error)
		}
	default:
	}
}
