package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/ioutil"
	"net"
	"net/rpc"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"rollgate.test/gohost/hostkit"
	"rollgate.test/gohost/pluginrpc"
)

// rawPlugin is a plugin started by hand, doing what go-plugin's client does step by step
// (handshake line, unix socket, yamux client, control/stdout/stderr streams, broker dial), so
// that raw streams can be opened on the same session.
type rawPlugin struct {
	cmd       *exec.Cmd
	conn      net.Conn
	sess      *yamux.Session
	control   *rpc.Client
	handshake string
	done      chan struct{} // closed when the process has exited
	exitErr   error

	mu          sync.Mutex
	stdoutExtra bytes.Buffer // anything the plugin printed after the handshake line
}

// pluginEnv is the environment the controller's go-plugin client gives a plugin.
func pluginEnv(cookie *string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, pluginrpc.Handshake.MagicCookieKey+"=") {
			env = append(env, kv)
		}
	}
	if cookie != nil {
		env = append(env, pluginrpc.Handshake.MagicCookieKey+"="+*cookie)
	}
	return append(env, "PLUGIN_MIN_PORT=0", "PLUGIN_MAX_PORT=0", "PLUGIN_PROTOCOL_VERSIONS=1")
}

func rawLaunch(c *hostkit.Command) (*rawPlugin, error) {
	cookie := pluginrpc.Handshake.MagicCookieValue
	cmd := exec.Command(c.Plugin, c.PluginArgs...)
	cmd.Env = pluginEnv(&cookie)
	cmd.Stderr = c.StderrSink
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &rawPlugin{cmd: cmd, done: make(chan struct{})}
	lineCh := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		line, err := br.ReadString('\n')
		if err != nil {
			line = ""
		}
		lineCh <- line
		var buf [4096]byte
		for {
			n, err := br.Read(buf[:])
			r.mu.Lock()
			r.stdoutExtra.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				break
			}
		}
		r.exitErr = cmd.Wait()
		close(r.done)
	}()
	select {
	case line := <-lineCh:
		r.handshake = strings.TrimRight(line, "\r\n")
	case <-time.After(10 * time.Second):
		r.kill()
		return nil, fmt.Errorf("no handshake line within 10s")
	}
	parts := strings.Split(r.handshake, "|")
	if len(parts) < 5 || parts[0] != "1" || parts[1] != "1" || parts[4] != "netrpc" {
		r.kill()
		return nil, fmt.Errorf("unexpected handshake line %q", r.handshake)
	}
	if r.conn, err = net.Dial(parts[2], parts[3]); err != nil {
		r.kill()
		return nil, err
	}
	if r.sess, err = yamux.Client(r.conn, nil); err != nil {
		r.kill()
		return nil, err
	}
	control, err := r.sess.Open()
	if err != nil {
		r.kill()
		return nil, err
	}
	for i := 0; i < 2; i++ { // stdout and stderr copy streams, drained like go-plugin does
		st, err := r.sess.Open()
		if err != nil {
			r.kill()
			return nil, err
		}
		go io.Copy(ioutil.Discard, st)
	}
	r.control = rpc.NewClient(control)
	return r, nil
}

// call makes an rpc call that gives up after d.
func call(c *rpc.Client, method string, args, reply interface{}, d time.Duration) error {
	ch := c.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-ch.Done:
		return ch.Error
	case <-time.After(d):
		return fmt.Errorf("%s: no reply within %s", method, d)
	}
}

// dispense asks for the plugin and dials the broker stream it names.
func (r *rawPlugin) dispense() (*rpc.Client, *yamux.Stream, error) {
	var id uint32
	if err := call(r.control, "Dispenser.Dispense", pluginrpc.DispenseName, &id, 5*time.Second); err != nil {
		return nil, nil, err
	}
	st, err := r.sess.OpenStream()
	if err != nil {
		return nil, nil, err
	}
	if err := binary.Write(st, binary.LittleEndian, id); err != nil {
		st.Close()
		return nil, nil, err
	}
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ack uint32
	if err := binary.Read(st, binary.LittleEndian, &ack); err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("broker ack: %w", err)
	}
	st.SetReadDeadline(time.Time{})
	if ack != id {
		st.Close()
		return nil, nil, fmt.Errorf("bad broker ack %d, want %d", ack, id)
	}
	return rpc.NewClient(st), st, nil
}

func (r *rawPlugin) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitExit waits up to d for the process to exit.
func (r *rawPlugin) waitExit(d time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (r *rawPlugin) exitCode() int {
	if r.cmd.ProcessState == nil {
		return -1
	}
	return r.cmd.ProcessState.ExitCode()
}

func (r *rawPlugin) extraStdout() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stdoutExtra.Len()
}

func (r *rawPlugin) kill() {
	if r.sess != nil {
		r.sess.Close()
	}
	if !r.exited() {
		r.cmd.Process.Kill()
		r.waitExit(5 * time.Second)
	}
}
