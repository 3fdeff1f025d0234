// weighted_test.go: Weighted against x/sync/semaphore's documented
// behaviour, side by side. Each scenario runs twice: on a reference model
// of x/sync's Weighted written from its documentation (FIFO; a request
// at the head blocks smaller ones behind it; a cancelled context removes
// its waiter and wakes those behind; TryAcquire fails while anyone waits;
// Release of more than held panics; a done context fails Acquire), and on
// semd's Weighted. Both must give the same outcomes. A waiter is known to
// be queued by its queue's length (semd: INFO's waiters=), never by
// sleeping.

package semd

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sem is what x/sync's Weighted and ours both offer.
type sem interface {
	Acquire(ctx context.Context, n int64) error
	TryAcquire(n int64) bool
	Release(n int64)
}

// refWeighted models x/sync/semaphore.Weighted as documented.
type refWeighted struct {
	mu      sync.Mutex
	size    int64
	cur     int64
	waiters list.List
}

type refWaiter struct {
	n     int64
	ready chan struct{}
}

func (s *refWeighted) Acquire(ctx context.Context, n int64) error {
	s.mu.Lock()
	if ctx.Err() != nil {
		s.mu.Unlock()
		return ctx.Err()
	}
	if s.size-s.cur >= n && s.waiters.Len() == 0 {
		s.cur += n
		s.mu.Unlock()
		return nil
	}
	if n > s.size {
		s.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	w := &refWaiter{n: n, ready: make(chan struct{})}
	e := s.waiters.PushBack(w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		select {
		case <-w.ready: // granted as ctx ended: give it back
			s.cur -= n
		default:
			s.waiters.Remove(e)
		}
		s.notify()
		s.mu.Unlock()
		return ctx.Err()
	}
}

func (s *refWeighted) TryAcquire(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.size-s.cur >= n && s.waiters.Len() == 0
	if ok {
		s.cur += n
	}
	return ok
}

func (s *refWeighted) Release(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur -= n
	if s.cur < 0 {
		panic("semaphore: released more than held")
	}
	s.notify()
}

func (s *refWeighted) notify() {
	for e := s.waiters.Front(); e != nil; e = s.waiters.Front() {
		w := e.Value.(*refWaiter)
		if s.size-s.cur < w.n {
			break // FIFO: the head blocks those behind it
		}
		s.cur += w.n
		s.waiters.Remove(e)
		close(w.ready)
	}
}

func (s *refWeighted) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters.Len()
}

// sideBoth runs scenario on the model and on semd (a daemon of its
// own, a fresh semaphore).
func sideBoth(t *testing.T, capacity int64, scenario func(t *testing.T, s sem, queued func() int)) {
	t.Run("x-sync-model", func(t *testing.T) {
		m := &refWeighted{size: capacity}
		scenario(t, m, m.queued)
	})
	t.Run("semd", func(t *testing.T) {
		d := startSemd(t)
		c := dial(t, Options{Addrs: []string{d.addr()}})
		name := "t." + strings.ReplaceAll(strings.ReplaceAll(t.Name(), "/", "."), "_", "-")
		w, err := NewWeighted(c, name, capacity)
		if err != nil {
			t.Fatal(err)
		}
		scenario(t, w, func() int { return waiters(t, c, name) })
	})
}

func acquireAsync(s sem, ctx context.Context, n int64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- s.Acquire(ctx, n) }()
	return ch
}

func waitQueued(t *testing.T, queued func() int, k int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d waiters queued", k), func() bool { return queued() == k })
}

func got(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer within 20 s", what)
		return nil
	}
}

func stillWaiting(ch <-chan error) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func TestFIFO(t *testing.T) {
	sideBoth(t, 1, func(t *testing.T, s sem, queued func() int) {
		ctx := bg(t)
		if !s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) on a free semaphore failed")
		}
		a := acquireAsync(s, ctx, 1)
		waitQueued(t, queued, 1)
		b := acquireAsync(s, ctx, 1)
		waitQueued(t, queued, 2)
		s.Release(1)
		if err := got(t, a, "the first waiter"); err != nil {
			t.Fatalf("first waiter: %v", err)
		}
		waitQueued(t, queued, 1)
		if !stillWaiting(b) {
			t.Fatal("the second waiter was served before the first released")
		}
		s.Release(1)
		if err := got(t, b, "the second waiter"); err != nil {
			t.Fatalf("second waiter: %v", err)
		}
		s.Release(1)
	})
}

func TestHeadOfLineBlocks(t *testing.T) {
	sideBoth(t, 4, func(t *testing.T, s sem, queued func() int) {
		ctx := bg(t)
		if err := s.Acquire(ctx, 3); err != nil {
			t.Fatal(err)
		}
		big := acquireAsync(s, ctx, 3) // 1 free: waits
		waitQueued(t, queued, 1)
		small := acquireAsync(s, ctx, 1) // 1 free, but behind big
		waitQueued(t, queued, 2)
		if !stillWaiting(small) {
			t.Fatal("a small request overtook the big one at the head")
		}
		if s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded while requests wait")
		}
		s.Release(3)
		if err := got(t, big, "big"); err != nil {
			t.Fatal(err)
		}
		if err := got(t, small, "small"); err != nil {
			t.Fatal(err)
		}
		s.Release(3)
		s.Release(1)
	})
}

func TestCancelHeadWakesBehind(t *testing.T) {
	sideBoth(t, 2, func(t *testing.T, s sem, queued func() int) {
		ctx := bg(t)
		if err := s.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		hctx, cancel := context.WithCancel(ctx)
		head := acquireAsync(s, hctx, 2)
		waitQueued(t, queued, 1)
		behind := acquireAsync(s, ctx, 1)
		waitQueued(t, queued, 2)
		cancel()
		if err := got(t, head, "the cancelled head"); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled head: got %v, want context.Canceled", err)
		}
		if err := got(t, behind, "the waiter behind"); err != nil {
			t.Fatalf("the waiter behind the cancelled head: %v", err)
		}
		waitQueued(t, queued, 0)
		s.Release(1)
		s.Release(1)
		if !s.TryAcquire(2) {
			t.Fatal("the cancelled request still holds something")
		}
		s.Release(2)
	})
}

func TestTryAcquireHonoursWaiters(t *testing.T) {
	sideBoth(t, 3, func(t *testing.T, s sem, queued func() int) {
		ctx := bg(t)
		if !s.TryAcquire(2) {
			t.Fatal("TryAcquire(2) of 3 failed")
		}
		wctx, cancel := context.WithCancel(ctx)
		w := acquireAsync(s, wctx, 2)
		waitQueued(t, queued, 1)
		if s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) succeeded with 1 free while a waiter waits")
		}
		cancel()
		got(t, w, "the cancelled waiter")
		waitQueued(t, queued, 0)
		if !s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) failed with 1 free and no waiter")
		}
		s.Release(1)
		s.Release(2)
	})
}

func TestDoneContextFails(t *testing.T) {
	sideBoth(t, 1, func(t *testing.T, s sem, queued func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Acquire(ctx, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with a done context: %v, want context.Canceled", err)
		}
		if !s.TryAcquire(1) {
			t.Fatal("the failed Acquire holds a permit")
		}
		s.Release(1)
	})
}

func TestMoreThanCapacityWaitsForContext(t *testing.T) {
	sideBoth(t, 2, func(t *testing.T, s sem, queued func() int) {
		ctx, cancel := context.WithCancel(context.Background())
		ch := acquireAsync(s, ctx, 3)
		cancel()
		if err := got(t, ch, "Acquire(3) of 2"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire(n > capacity): %v, want context.Canceled", err)
		}
		if s.TryAcquire(3) {
			t.Fatal("TryAcquire(n > capacity) succeeded")
		}
	})
}

func mustPanic(t *testing.T, what string, f func()) string {
	t.Helper()
	var msg string
	func() {
		defer func() { msg = fmt.Sprint(recover()) }()
		f()
	}()
	if msg == "<nil>" {
		t.Fatalf("%s did not panic", what)
	}
	return msg
}

func TestReleaseMoreThanHeldPanics(t *testing.T) {
	sideBoth(t, 3, func(t *testing.T, s sem, queued func() int) {
		if !s.TryAcquire(1) {
			t.Fatal("TryAcquire(1) failed")
		}
		msg := mustPanic(t, "Release(2) with 1 held", func() { s.Release(2) })
		if !strings.Contains(msg, "released more than held") {
			t.Fatalf("panic %q", msg)
		}
	})
}

// The documented difference: semd releases whole grants.
func TestReleaseWholeGrants(t *testing.T) {
	d := startSemd(t)
	c := dial(t, Options{Addrs: []string{d.addr()}})
	w, err := NewWeighted(c, "whole", 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	for _, n := range []int64{2, 3, 1} {
		if err := w.Acquire(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	w.Release(1) // the grant of exactly 1
	if u := used(t, c, "whole"); u != 5 {
		t.Fatalf("used %d after Release(1) of 2+3+1, want 5", u)
	}
	msg := mustPanic(t, "Release(4) of 2+3", func() { w.Release(4) })
	if !strings.Contains(msg, "split") {
		t.Fatalf("panic %q, want one about splitting a grant", msg)
	}
	w.Release(5) // 2 then 3
	if u := used(t, c, "whole"); u != 0 {
		t.Fatalf("used %d after releasing everything", u)
	}
}

func TestNewWeighted(t *testing.T) {
	d := startSemd(t, "--semaphore", "gpu", "8")
	c := dial(t, Options{Addrs: []string{d.addr()}})
	if _, err := NewWeighted(c, "gpu", 8); err != nil {
		t.Fatalf("NewWeighted of an existing semaphore, same capacity: %v", err)
	}
	if _, err := NewWeighted(c, "gpu", 4); !errors.Is(err, ErrExists) {
		t.Fatalf("NewWeighted with another capacity: %v, want ErrExists", err)
	}
	if _, err := NewWeighted(c, "new.one", 2); err != nil {
		t.Fatal(err)
	}
	if info(t, c, "new.one")["capacity"] != "2" {
		t.Fatal("NewWeighted did not create new.one with capacity 2")
	}
	if _, err := NewWeighted(c, "bad name", 2); err == nil {
		t.Fatal("a name with a space was accepted")
	}
}

// Many goroutines on several clients never hold more than the capacity
// together; the shared connection's pipelined replies stay matched.
func TestNeverOverCapacity(t *testing.T) { neverOverCapacity(t, startSemd(t)) }

// The same in sync mode: every grant is answered once Redis has it.
func TestNeverOverCapacitySync(t *testing.T) {
	r := startRedis(t)
	neverOverCapacity(t, startSemd(t, "--redis", r.addr()))
}

func neverOverCapacity(t *testing.T, d *daemon) {
	const capacity, workers, rounds = 3, 12, 40
	var inUse, peak int64
	var wg sync.WaitGroup
	var clients []*Client
	for i := 0; i < 3; i++ {
		clients = append(clients, dial(t, Options{Addrs: []string{d.addr()}}))
	}
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		c := clients[i%len(clients)]
		w, err := NewWeighted(c, "pool", capacity)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n := int64(1 + i%2)
			for r := 0; r < rounds; r++ {
				if r%3 == 0 {
					if !w.TryAcquire(n) {
						continue
					}
				} else if err := w.Acquire(context.Background(), n); err != nil {
					errs <- err
					return
				}
				now := atomic.AddInt64(&inUse, n)
				for {
					p := atomic.LoadInt64(&peak)
					if now <= p || atomic.CompareAndSwapInt64(&peak, p, now) {
						break
					}
				}
				atomic.AddInt64(&inUse, -n)
				w.Release(n)
			}
		}(i)
	}
	// Meanwhile, pipelined requests on one shared connection.
	var pw sync.WaitGroup
	for i := 0; i < 8; i++ {
		pw.Add(1)
		go func(i int) {
			defer pw.Done()
			name := fmt.Sprintf("pipe%d", i)
			if _, err := NewWeighted(clients[0], name, int64(i+1)); err != nil {
				errs <- err
				return
			}
			for r := 0; r < 50; r++ {
				line, err := clients[0].Do(context.Background(), "INFO "+name)
				if err != nil || keyValues(line)["name"] != name {
					errs <- fmt.Errorf("INFO %s answered %q, %v", name, line, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	pw.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if peak > capacity {
		t.Fatalf("%d permits held at once, capacity %d", peak, capacity)
	}
	if u := used(t, clients[0], "pool"); u != 0 {
		t.Fatalf("used %d after every release", u)
	}
}
