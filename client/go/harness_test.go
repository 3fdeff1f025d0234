// harness_test.go: real daemons for the tests. semd is found through
// SEMD_BIN (as the other test suites find it), else ../../daemon/semd; it
// listens on 127.0.0.1 and a free port (--port 0, learnt from its log),
// and is always stopped by PID (t.Cleanup), its exit status and log
// checked. redis-server, where installed, gets a private directory and
// port, and is stopped the same way.

package semd

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const startTimeout = 30 * time.Second

func semdBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SEMD_BIN")
	if bin == "" {
		bin, _ = filepath.Abs("../../daemon/semd")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("semd not found at %s (set SEMD_BIN): %v", bin, err)
	}
	return bin
}

type daemon struct {
	t       *testing.T
	args    []string
	port    int
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

var listenRe = regexp.MustCompile(`(?m)listening on 127\.0\.0\.1:(\d+)\s*$`)

// startSemd runs semd --bind 127.0.0.1 --port 0 args... and waits until it
// has logged its port and "ready".
func startSemd(t *testing.T, args ...string) *daemon {
	t.Helper()
	d := &daemon{t: t, args: args}
	d.start(0)
	t.Cleanup(func() { d.stop(true) })
	return d
}

func (d *daemon) start(port int) {
	t := d.t
	t.Helper()
	d.logPath = filepath.Join(t.TempDir(), "semd.log")
	logf, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"--bind", "127.0.0.1", "--port", "0"}, d.args...)
	argv = append(argv, "--port", strconv.Itoa(port))
	d.cmd = exec.Command(semdBin(t), argv...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	d.exited = make(chan struct{})
	go func(c *exec.Cmd, ch chan struct{}) { c.Wait(); close(ch) }(d.cmd, d.exited)
	deadline := time.Now().Add(startTimeout)
	for {
		text := d.log()
		if m := listenRe.FindStringSubmatch(text); m != nil &&
			strings.Contains(text[strings.Index(text, "listening on"):], "ready") {
			d.port, _ = strconv.Atoi(m[1])
			return
		}
		select {
		case <-d.exited:
			t.Fatalf("semd %v exited at start-up: %s", argv, text)
		default:
		}
		if time.Now().After(deadline) {
			d.stop(false)
			t.Fatalf("semd %v not ready within %v: %s", argv, startTimeout, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *daemon) log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

func (d *daemon) addr() string { return fmt.Sprintf("127.0.0.1:%d", d.port) }

func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM (SIGKILL after 10 s); with check, the exit status
// must be 0 and the log free of sanitizer reports.
func (d *daemon) stop(check bool) {
	if d.cmd == nil || !d.alive() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		if check {
			d.t.Errorf("semd pid %d did not exit within 10 s of SIGTERM", d.cmd.Process.Pid)
		}
		return
	}
	if !check {
		return
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		d.t.Errorf("semd pid %d exited %d on SIGTERM: %s", d.cmd.Process.Pid, code, d.log())
	}
	for _, m := range []string{"AddressSanitizer", "LeakSanitizer", "runtime error:"} {
		if strings.Contains(d.log(), m) {
			d.t.Errorf("semd log has a sanitizer report: %s", d.log())
		}
	}
}

// kill9 kills semd by PID with SIGKILL and waits for it.
func (d *daemon) kill9() {
	d.cmd.Process.Kill()
	<-d.exited
}

// restart starts semd again on the same port and arguments.
func (d *daemon) restart() { d.start(d.port) }

// --- redis-server ---

type redis struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server (skips the test where none is
// installed), on 127.0.0.1, a free port and a directory of its own.
func startRedis(t *testing.T) *redis {
	t.Helper()
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server is not installed: the sync-mode tests need it (Debian: redis-server)")
		}
	}
	dir := t.TempDir()
	r := &redis{port: freePort(t), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--save", "", "--dir", dir, "--daemonize", "no", "--appendonly", "yes",
		"--appendfsync", "always", "--logfile", filepath.Join(dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	deadline := time.Now().Add(startTimeout)
	for {
		if c, err := net.DialTimeout("tcp", r.addr(), time.Second); err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			c.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return r
			}
		}
		select {
		case <-r.done:
			t.Fatalf("redis-server exited at start-up")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not answering PING within %v", startTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *redis) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// --- helpers ---

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := DialOptions(bg(t), opts)
	if err != nil {
		t.Fatalf("Dial %v: %v", opts.Addrs, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually polls pred until it holds, for a generous bound.
func eventually(t *testing.T, what string, pred func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !pred() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20 s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// info is INFO sem as a map.
func info(t *testing.T, c *Client, sem string) map[string]string {
	t.Helper()
	line, err := c.Do(context.Background(), "INFO "+sem)
	if err != nil {
		t.Fatalf("INFO %s: %v", sem, err)
	}
	return keyValues(line)
}

// waiters is the number of waiters semd has on sem.
func waiters(t *testing.T, c *Client, sem string) int {
	n, _ := strconv.Atoi(info(t, c, sem)["waiters"])
	return n
}

func used(t *testing.T, c *Client, sem string) int {
	n, _ := strconv.Atoi(info(t, c, sem)["used"])
	return n
}
