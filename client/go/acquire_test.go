package semd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lossyProxy relays to semd, but loses the reply to the first `drops`
// requests that carry an ID: the request reaches semd, its reply is read
// and both connections are closed, as a network failure after sending.
type lossyProxy struct {
	ln    net.Listener
	up    string
	drops atomic.Int32
	lost  atomic.Int32
	mu    sync.Mutex
	lines []string // requests seen, in order
	// onLose, if set, runs when a reply has been read and before the
	// client's connection is closed.
	onLose func()
}

func startLossyProxy(t *testing.T, upstream string, drops int32) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, up: upstream}
	p.drops.Store(drops)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			cl, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(cl)
		}
	}()
	return p
}

func (p *lossyProxy) addr() string { return p.ln.Addr().String() }

func (p *lossyProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

func (p *lossyProxy) serve(cl net.Conn) {
	up, err := net.Dial("tcp", p.up)
	if err != nil {
		cl.Close()
		return
	}
	var dropping atomic.Bool
	go func() { // semd -> client: the reply after a dropped request is lost
		br := bufio.NewReader(up)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				cl.Close()
				return
			}
			if dropping.Load() {
				p.lost.Add(1)
				if p.onLose != nil {
					p.onLose()
				}
				cl.Close()
				up.Close()
				return
			}
			if _, err := cl.Write([]byte(line)); err != nil {
				up.Close()
				return
			}
		}
	}()
	br := bufio.NewReader(cl)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			up.Close()
			return
		}
		p.mu.Lock()
		p.lines = append(p.lines, strings.TrimSpace(line))
		p.mu.Unlock()
		if strings.Contains(line, " ID ") && p.drops.Add(-1) >= 0 {
			dropping.Store(true)
		}
		if _, err := up.Write([]byte(line)); err != nil {
			cl.Close()
			return
		}
	}
}

func holders(t *testing.T, c *Client, sem string) []map[string]string {
	t.Helper()
	rows, err := c.List(context.Background(), "HOLDERS "+sem)
	if err != nil {
		t.Fatalf("HOLDERS %s: %v", sem, err)
	}
	return rows
}

func weighted(t *testing.T, c *Client, name string, capacity int64) *Weighted {
	t.Helper()
	w, err := NewWeighted(c, name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Both or neither: a try that cannot have a gets nothing of b either; a
// granted AcquireAll holds both under one token, and Release frees both.
func TestAcquireAllBothOrNeither(t *testing.T) {
	d := startSemd(t)
	c := dial(t, Options{Addrs: []string{d.addr()}})
	ctx := bg(t)
	a := weighted(t, c, "a", 1)
	weighted(t, c, "b", 2)
	pa, err := a.AcquireLease(ctx, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	parts := []Part{{"a", 1}, {"b", 2}}
	if _, err := c.AcquireAll(ctx, parts, AcquireOptions{Lease: 30 * time.Second, Try: true}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("AcquireAll try with a held: %v, want ErrTimeout", err)
	}
	if u := used(t, c, "b"); u != 0 {
		t.Fatalf("b used %d after a refused AcquireAll, want 0", u)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.AcquireAll(short, parts, AcquireOptions{Lease: 30 * time.Second})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcquireAll past its ctx: %v", err)
	}
	if err := pa.Release(); err != nil {
		t.Fatal(err)
	}
	p, err := c.AcquireAll(ctx, parts, AcquireOptions{Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if used(t, c, "a") != 1 || used(t, c, "b") != 2 {
		t.Fatalf("used a=%d b=%d, want 1 and 2", used(t, c, "a"), used(t, c, "b"))
	}
	for _, sem := range []string{"a", "b"} {
		rows := holders(t, c, sem)
		if len(rows) != 1 || rows[0]["token"] != fmt.Sprint(p.Token()) || rows[0]["multi"] != "2" {
			t.Fatalf("HOLDERS %s: %v, want one grant, token %d, multi=2", sem, rows, p.Token())
		}
	}
	if got := p.Parts(); len(got) != 2 || got[1] != (Part{"b", 2}) {
		t.Fatalf("Parts %v", got)
	}
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if used(t, c, "a") != 0 || used(t, c, "b") != 0 {
		t.Fatal("Release left a part held")
	}
	for _, bad := range [][]Part{{{"a", 1}}, {{"a", 1}, {"a", 1}}, {{"a", 1}, {"b c", 1}}, {{"a", 0}, {"b", 1}}} {
		if _, err := c.AcquireAll(ctx, bad, AcquireOptions{Lease: time.Second}); err == nil {
			t.Fatalf("AcquireAll %v accepted", bad)
		}
	}
	if _, err := c.AcquireAll(ctx, []Part{{"a", 2}, {"b", 1}}, AcquireOptions{Lease: time.Second}); !errors.Is(err, ErrRange) {
		t.Fatalf("AcquireAll over a's capacity: %v, want ErrRange", err)
	}
}

// The same id answers the same token and grants nothing more; another n
// with that id is ErrExists; an id goes with AcquireAll as well.
func TestRequestIDRepeat(t *testing.T) {
	d := startSemd(t)
	c := dial(t, Options{Addrs: []string{d.addr()}})
	other := dial(t, Options{Addrs: []string{d.addr()}})
	ctx := bg(t)
	w := weighted(t, c, "db", 5)
	w2 := weighted(t, other, "db", 5)
	opts := AcquireOptions{Lease: 30 * time.Second, ID: "job-17"}
	p1, err := w.AcquireLeaseWith(ctx, 2, opts)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := w2.AcquireLeaseWith(ctx, 2, opts) // another client, same id
	if err != nil {
		t.Fatal(err)
	}
	if p1.Token() != p2.Token() {
		t.Fatalf("same id, tokens %d and %d", p1.Token(), p2.Token())
	}
	opts.Try = true
	if p3, err := w.AcquireLeaseWith(ctx, 2, opts); err != nil || p3.Token() != p1.Token() {
		t.Fatalf("try with the same id: %v, %v", p3, err)
	} else {
		p3.stopOnce.Do(func() { close(p3.stop) })
	}
	if rows := holders(t, c, "db"); len(rows) != 1 || used(t, c, "db") != 2 {
		t.Fatalf("HOLDERS db after three acquires with one id: %v", rows)
	}
	if _, err := w.AcquireLeaseWith(ctx, 3, AcquireOptions{Lease: time.Second, ID: "job-17"}); !errors.Is(err, ErrExists) {
		t.Fatalf("the same id with another n: %v, want ErrExists", err)
	}
	for _, bad := range []string{"a b", strings.Repeat("x", 65), "é"} {
		if _, err := w.AcquireLeaseWith(ctx, 1, AcquireOptions{Lease: time.Second, ID: bad}); err == nil {
			t.Fatalf("id %q accepted", bad)
		}
	}
	p2.stopOnce.Do(func() { close(p2.stop) }) // the same grant as p1
	if err := p1.Release(); err != nil {
		t.Fatal(err)
	}

	weighted(t, c, "gpu", 1)
	all := AcquireOptions{Lease: 30 * time.Second, ID: "train-1"}
	q1, err := c.AcquireAll(ctx, []Part{{"gpu", 1}, {"db", 2}}, all)
	if err != nil {
		t.Fatal(err)
	}
	q2, err := other.AcquireAll(ctx, []Part{{"db", 2}, {"gpu", 1}}, all) // any order
	if err != nil || q2.Token() != q1.Token() {
		t.Fatalf("AcquireAll repeated: %v, token %d want %d", err, q2.Token(), q1.Token())
	}
	if _, err := c.AcquireAll(ctx, []Part{{"gpu", 1}, {"db", 1}}, all); !errors.Is(err, ErrExists) {
		t.Fatalf("AcquireAll with the same id and another n: %v, want ErrExists", err)
	}
	q2.stopOnce.Do(func() { close(q2.stop) })
	if err := q1.Release(); err != nil {
		t.Fatal(err)
	}
}

var drawnID = regexp.MustCompile(` ID [0-9a-f]{32}$`)

// A leased acquire whose reply is lost is sent again with the same drawn
// id on a new connection and learns the same token: one grant held.
func TestLostReplyRetried(t *testing.T) {
	d := startSemd(t)
	check := dial(t, Options{Addrs: []string{d.addr()}})
	ctx := bg(t)
	weighted(t, check, "a", 1)
	weighted(t, check, "b", 1)
	for _, multi := range []bool{false, true} {
		px := startLossyProxy(t, d.addr(), 1)
		c := dial(t, Options{Addrs: []string{px.addr()}})
		var p *Permit
		var err error
		if multi {
			p, err = c.AcquireAll(ctx, []Part{{"a", 1}, {"b", 1}}, AcquireOptions{Lease: 30 * time.Second})
		} else {
			p, err = weighted(t, c, "a", 1).AcquireLease(ctx, 1, 30*time.Second)
		}
		if err != nil {
			t.Fatalf("multi=%v: %v", multi, err)
		}
		if px.lost.Load() != 1 {
			t.Fatalf("multi=%v: the proxy lost %d replies, want 1", multi, px.lost.Load())
		}
		var acq []string
		for _, l := range px.seen() {
			if strings.HasPrefix(l, "ACQUIRE") {
				acq = append(acq, l)
			}
		}
		if len(acq) != 2 || acq[0] != acq[1] || !drawnID.MatchString(acq[0]) {
			t.Fatalf("multi=%v: acquires sent %q, want the same line with a drawn ID twice", multi, acq)
		}
		rows := holders(t, check, "a")
		if len(rows) != 1 || rows[0]["token"] != fmt.Sprint(p.Token()) {
			t.Fatalf("multi=%v: HOLDERS a %v, want only token %d", multi, rows, p.Token())
		}
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if used(t, check, "a") != 0 || used(t, check, "b") != 0 {
			t.Fatalf("multi=%v: held after Release", multi)
		}
	}
}

// Two goroutines take a and b (capacity 1 each) in opposite orders, over
// and over: AcquireAll never deadlocks and never over-grants.
func TestAcquireAllOppositeOrders(t *testing.T) {
	d := startSemd(t)
	c := dial(t, Options{Addrs: []string{d.addr()}})
	weighted(t, c, "a", 1)
	weighted(t, c, "b", 1)
	ctx := bg(t)
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, order := range [][]Part{{{"a", 1}, {"b", 1}}, {{"b", 1}, {"a", 1}}} {
		order := order
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				p, err := c.AcquireAll(ctx, order, AcquireOptions{Lease: 30 * time.Second})
				if err != nil {
					errs <- fmt.Errorf("%v round %d: %w", order, i, err)
					return
				}
				if inside.Add(1) != 1 {
					errs <- fmt.Errorf("two holders of a and b at once")
				}
				inside.Add(-1)
				if err := p.Release(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A semd before 1.1 answers ERR PROTO to ID: a drawn id is dropped and
// the acquire sent again without one (once per Client); the caller's
// own id is not dropped. A reply lost for good is ErrLost once the
// retries of FailoverTimeout are spent.
func TestIDOldSemdAndRetryBound(t *testing.T) {
	f := startFake(t, func(line string) string {
		switch {
		case strings.HasPrefix(line, "CREATE "), strings.HasPrefix(line, "PING"),
			strings.HasPrefix(line, "REFRESH "), strings.HasPrefix(line, "RELEASE "):
			return "OK"
		case strings.HasPrefix(line, "WATCH "):
			return "ERR PROTO unknown command"
		case strings.HasPrefix(line, "ACQUIRE gone "):
			return "" // the reply is always lost
		case strings.Contains(line, " ID "):
			return "ERR PROTO unknown option ID"
		}
		return "OK 7"
	})
	c := dial(t, Options{Addrs: []string{f.l.Addr().String()}, FailoverTimeout: 700 * time.Millisecond})
	ctx := bg(t)
	w := weighted(t, c, "old", 3)
	for i := 0; i < 2; i++ {
		p, err := w.AcquireLease(ctx, 1, 10*time.Second)
		if err != nil || p.Token() != 7 {
			t.Fatalf("lease from a 1.0 semd: %v", err)
		}
		p.Release()
	}
	if n := f.count("ACQUIRE old 1 LEASE 10000 ID "); n != 1 {
		t.Fatalf("a drawn ID sent %d times to a semd that refused it, want once", n)
	}
	if _, err := w.AcquireLeaseWith(ctx, 1, AcquireOptions{Lease: time.Second, ID: "mine"}); !errors.Is(err, ErrProto) {
		t.Fatalf("the caller's own id refused: %v, want ErrProto", err)
	}
	c2 := dial(t, Options{Addrs: []string{f.l.Addr().String()}, FailoverTimeout: 700 * time.Millisecond})
	g := weighted(t, c2, "gone", 1)
	start := time.Now()
	if _, err := g.AcquireLease(ctx, 1, 10*time.Second); !errors.Is(err, ErrLost) {
		t.Fatalf("a reply lost for good: %v, want ErrLost", err)
	}
	if n := f.count("ACQUIRE gone "); n < 3 {
		t.Fatalf("a lost reply sent %d times in %v, want retries", n, time.Since(start))
	}
}

// A leased AcquireAll whose reply was lost just before a kill -9 of a
// persistent semd is sent again after the restart with its id, and gets
// the same token: one grant on each semaphore.
func TestLostReplyAcrossRestart(t *testing.T) {
	r := startRedis(t)
	d := startSemd(t, "--redis", r.addr(), "--owner-lease", "1s")
	check := dial(t, Options{Addrs: []string{d.addr()}})
	weighted(t, check, "gpu", 1)
	weighted(t, check, "db", 2)
	px := startLossyProxy(t, d.addr(), 1)
	lost, resume := make(chan struct{}), make(chan struct{})
	// The proxy has read the reply (sync mode: Redis has the grant); the
	// restart runs in the test's goroutine, then the client's
	// connection is closed.
	px.onLose = func() {
		close(lost)
		<-resume
	}
	c := dial(t, Options{Addrs: []string{px.addr()}, FailoverTimeout: 20 * time.Second})
	type result struct {
		p   *Permit
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.AcquireAll(bg(t), []Part{{"gpu", 1}, {"db", 2}}, AcquireOptions{Lease: 30 * time.Second})
		done <- result{p, err}
	}()
	select {
	case <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy saw no reply to lose")
	}
	d.kill9()
	d.restart()
	close(resume)
	res := <-done
	if res.err != nil {
		t.Fatalf("AcquireAll across the restart: %v", res.err)
	}
	var ids []string
	for _, l := range px.seen() {
		if strings.HasPrefix(l, "ACQUIREALL") {
			ids = append(ids, l[strings.Index(l, " ID "):])
		}
	}
	if len(ids) < 2 || ids[0] != ids[len(ids)-1] {
		t.Fatalf("ACQUIREALL ids sent %q, want one id sent again", ids)
	}
	check = dial(t, Options{Addrs: []string{d.addr()}})
	for _, sem := range []string{"gpu", "db"} {
		rows := holders(t, check, sem)
		if len(rows) != 1 || rows[0]["token"] != fmt.Sprint(res.p.Token()) {
			t.Fatalf("HOLDERS %s after the restart: %v, want only token %d", sem, rows, res.p.Token())
		}
	}
	if err := res.p.Release(); err != nil {
		t.Fatal(err)
	}
}
