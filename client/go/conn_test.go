// conn_test.go: the lost-reply rules against a scripted fake semd (a
// request whose reply was lost is never sent again, on any connection),
// AUTH, and the owner found behind a standby's redirect.

package semd

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSemd answers NAME with OK and hands every other line to answer;
// answer returns the reply, or "" to close the connection unanswered.
type fakeSemd struct {
	l     net.Listener
	mu    sync.Mutex
	lines []string
}

func startFake(t *testing.T, answer func(line string) string) *fakeSemd {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSemd{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func(nc net.Conn) {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimSpace(line)
					f.mu.Lock()
					f.lines = append(f.lines, line)
					f.mu.Unlock()
					reply := "OK"
					if !strings.HasPrefix(line, "NAME ") {
						reply = answer(line)
					}
					if reply == "" {
						return
					}
					nc.Write([]byte(reply + "\r\n"))
				}
			}(nc)
		}
	}()
	return f
}

func (f *fakeSemd) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func TestLostReplyNeverResent(t *testing.T) {
	f := startFake(t, func(line string) string {
		switch {
		case strings.HasPrefix(line, "CREATE "), strings.HasPrefix(line, "PING"):
			return "OK"
		case strings.HasPrefix(line, "INFO "):
			return "OK name=x capacity=1 used=0 available=1 holders=0 waiters=0"
		}
		return "" // ACQUIRE, TRY, RELEASE: the connection drops, no reply
	})
	addr := f.l.Addr().String()
	c := dial(t, Options{Addrs: []string{addr}})
	w, err := NewWeighted(c, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Acquire(bg(t), 1); !errors.Is(err, ErrLost) {
		t.Fatalf("Acquire whose reply was lost: %v, want ErrLost", err)
	}
	if w.TryAcquire(1) {
		t.Fatal("TryAcquire whose reply was lost said granted")
	}
	if _, err := c.Do(bg(t), "RELEASE x 7"); !errors.Is(err, ErrNoReply) {
		t.Fatalf("RELEASE whose reply was lost: %v, want ErrNoReply", err)
	}
	// The connection is re-made for the next request...
	if line, err := c.Do(bg(t), "PING"); err != nil || line != "OK" {
		t.Fatalf("PING after the lost replies: %q, %v", line, err)
	}
	// ...and none of the lost requests was sent twice.
	for _, p := range []string{"ACQUIRE ", "TRY ", "RELEASE "} {
		if n := f.count(p); n != 1 {
			t.Errorf("%q sent %d times, want once", p, n)
		}
	}
}

func TestStandbyRedirect(t *testing.T) {
	owner := startFake(t, func(line string) string { return "OK PONG" })
	// The standby refuses NAME, naming the owner, which the client was
	// not given: it must learn the address and go there.
	standby := startFakeStandby(t, owner.l.Addr().String())
	c := dial(t, Options{Addrs: []string{standby.Addr().String()}})
	line, err := c.Do(bg(t), "PING")
	if err != nil || line != "OK PONG" {
		t.Fatalf("PING through a standby's redirect: %q, %v", line, err)
	}
	if owner.count("PING") != 1 {
		t.Fatal("the owner did not get the PING")
	}
}

// startFakeStandby refuses NAME and everything else with ERR STANDBY.
func startFakeStandby(t *testing.T, owner string) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func(nc net.Conn) {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
					nc.Write([]byte("ERR STANDBY owner=" + owner + " this semd is a standby\r\n"))
				}
			}(nc)
		}
	}()
	return l
}

func TestAuth(t *testing.T) {
	d := startSemd(t, "--requirepass", "s3cret")
	c := dial(t, Options{Addrs: []string{d.addr()}, Password: "s3cret"})
	if line, err := c.Do(bg(t), "PING"); err != nil || line != "OK PONG" {
		t.Fatalf("PING after AUTH: %q, %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := DialOptions(ctx, Options{Addrs: []string{d.addr()}, Password: "wrong"}); !errors.Is(err, ErrAuth) {
		t.Fatalf("Dial with a wrong password: %v, want ErrAuth", err)
	}
}

// Do and List keep the shared connection's replies in step: a listing
// read through Do is read whole, and requests that would wait or change
// the connection are refused before anything is sent.
func TestDoAndList(t *testing.T) {
	d := startSemd(t, "--semaphore", "s", "2")
	c := dial(t, Options{Addrs: []string{d.addr()}, Name: "lister"})
	ctx := bg(t)
	if line, err := c.Do(ctx, "holders s"); err != nil || line != "OK 0" {
		t.Fatalf("Do(HOLDERS): %q, %v", line, err)
	}
	if line, err := c.Do(ctx, "CLIENTS"); err != nil || !strings.HasPrefix(line, "OK ") {
		t.Fatalf("Do(CLIENTS): %q, %v", line, err)
	}
	if line, err := c.Do(ctx, "PING"); err != nil || line != "OK PONG" {
		t.Fatalf("PING after listings through Do: %q, %v", line, err)
	}
	rows, err := c.List(ctx, "CLIENTS")
	found := false
	for _, r := range rows {
		found = found || r["name"] == "lister"
	}
	if err != nil || !found {
		t.Fatalf("List(CLIENTS) = %v, %v: no connection named lister", rows, err)
	}
	for _, bad := range []string{"ACQUIRE s 1", "watch s 1", "NAME x", "PING\nPING", ""} {
		if _, err := c.Do(ctx, bad); err == nil {
			t.Errorf("Do(%q) was sent", bad)
		}
	}
	if _, err := c.List(ctx, "PING"); err == nil {
		t.Error("List(PING) was sent")
	}
	if _, err := c.Do(ctx, "INFO nosuch"); !errors.Is(err, ErrNoSem) {
		t.Errorf("INFO of an unknown semaphore: %v, want ErrNoSem", err)
	}
	if line, err := c.Do(ctx, "PING"); err != nil || line != "OK PONG" {
		t.Fatalf("PING at the end: %q, %v", line, err)
	}
}

// A connection over maxclients is refused with ERR LIMIT as it opens:
// the wait that needed it says so, and nothing is held.
func TestLimitSaid(t *testing.T) {
	d := startSemd(t, "--maxclients", "1", "--semaphore", "s", "1")
	c := dial(t, Options{Addrs: []string{d.addr()}})
	w, err := NewWeighted(c, "s", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Acquire(bg(t), 1); !errors.Is(err, ErrLimit) {
		t.Fatalf("Acquire needing a connection over maxclients: %v, want ErrLimit", err)
	}
	if !w.TryAcquire(1) {
		t.Fatal("TryAcquire on the shared connection failed")
	}
	w.Release(1)
}
