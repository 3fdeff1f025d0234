// permit_test.go: leases, the keeper and Lost(); bound permits after a
// kill -9 and restart of semd (sync mode, a private redis-server), after a
// failover between an owner and a standby, and lost in memory mode.

package semd

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestLeaseKeptAndLost(t *testing.T) {
	d := startSemd(t)
	c := dial(t, Options{Addrs: []string{d.addr()}})
	w, err := NewWeighted(c, "db", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	p, err := w.AcquireLease(ctx, 1, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Kept well past its length: the keeper refreshes it.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case <-p.Lost():
			t.Fatalf("a kept lease was lost: %v", p.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := c.Do(ctx, "CHECK db "+strconv.FormatUint(p.Token(), 10)); err != nil {
		t.Fatalf("CHECK of the kept lease: %v", err)
	}
	q, err := w.AcquireLease(ctx, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if q.Token() <= p.Token() {
		t.Fatalf("tokens %d then %d: not increasing", p.Token(), q.Token())
	}
	// An operator revokes it: the WATCH tells at once.
	other := dial(t, Options{Addrs: []string{d.addr()}})
	if _, err := other.Do(ctx, "REVOKE db "+strconv.FormatUint(q.Token(), 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Lost():
	case <-time.After(20 * time.Second):
		t.Fatal("Lost() not closed within 20 s of REVOKE")
	}
	if !errors.Is(q.Err(), ErrPermitLost) {
		t.Fatalf("Err() = %v", q.Err())
	}
	if err := q.Release(); err == nil {
		t.Fatal("Release of a lost lease said nothing")
	}
	if err := p.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if u := used(t, c, "db"); u != 0 {
		t.Fatalf("used %d after both leases ended", u)
	}
	// Cancelled while waiting: nothing held afterwards.
	full, _ := w.AcquireLease(ctx, 2, 10*time.Second)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := w.AcquireLease(cctx, 1, time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a lease wait past its context: %v", err)
	}
	full.Release()
	eventually(t, "nothing held", func() bool { return used(t, c, "db") == 0 && waiters(t, c, "db") == 0 })
}

// In memory mode a bound permit whose connection semd closed is gone:
// the client reconnects, ATTACH is refused, OnLost is told, and Release
// of it makes no request and does not panic.
func TestBoundLostMemoryMode(t *testing.T) {
	d := startSemd(t)
	lost := make(chan LostPermit, 4)
	c := dial(t, Options{Addrs: []string{d.addr()}, Name: "victim", OnLost: func(l LostPermit) { lost <- l }})
	w, err := NewWeighted(c, "jobs", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !w.TryAcquire(1) {
		t.Fatal("TryAcquire failed")
	}
	admin := dial(t, Options{Addrs: []string{d.addr()}, Name: "admin"})
	rows, err := admin.List(bg(t), "CLIENTS")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r["name"] == "victim" && r["grants"] == "1" {
			if _, err := admin.Do(bg(t), "KILL "+r["id"]); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case l := <-lost:
		if l.Sem != "jobs" || l.N != 1 || !errors.Is(l.Err, ErrNotHeld) {
			t.Fatalf("lost %+v", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnLost not called within 20 s of KILL")
	}
	w.Release(1)
	if !w.TryAcquire(1) {
		t.Fatal("TryAcquire after the lost permit failed")
	}
	w.Release(1)
}

// kill -9 and restart of semd (sync mode): the bound permit is ATTACHed
// again by the client on its own, and a lease survives.
func TestRestartReattach(t *testing.T) {
	r := startRedis(t)
	d := startSemd(t, "--redis", r.addr(), "--reclaim-grace", "10s")
	var mu sync.Mutex
	var lost []LostPermit
	c := dial(t, Options{Addrs: []string{d.addr()}, OnLost: func(l LostPermit) {
		mu.Lock()
		lost = append(lost, l)
		mu.Unlock()
	}})
	w, err := NewWeighted(c, "gpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	if err := w.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The keeper calls a lease lost when it could not refresh it for
	// the whole lease: 10 s covers a restart on a busy machine.
	p, err := w.AcquireLease(ctx, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d.kill9()
	d.restart()
	check := dial(t, Options{Addrs: []string{d.addr()}})
	eventually(t, "the bound permit owned again after the restart", func() bool {
		rows, err := check.List(ctx, "HOLDERS gpu")
		if err != nil {
			return false
		}
		owned := 0
		for _, h := range rows {
			if h["kind"] == "conn" && h["owner"] != "-" {
				owned++
			}
		}
		return owned == 1 && len(rows) == 2
	})
	// Both are held: one attached (owned, so reclaim-grace does not
	// release it), one a lease.
	if w.TryAcquire(1) {
		t.Fatal("a third permit of 2 was granted after the restart")
	}
	select {
	case <-p.Lost():
		t.Fatalf("the lease was lost across the restart: %v", p.Err())
	default:
	}
	mu.Lock()
	if len(lost) != 0 {
		t.Fatalf("lost %+v", lost)
	}
	mu.Unlock()
	w.Release(1)
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nothing held", func() bool { return used(t, check, "gpu") == 0 })
}

// An owner and a standby on one Redis; the client knows both. kill -9 of
// the owner: the client finds the standby once it has taken over, and
// ATTACHes its bound permit there; the lease stays held; new requests go
// to the new owner.
func TestFailoverFollowed(t *testing.T) {
	r := startRedis(t)
	args := []string{"--redis", r.addr(), "--reclaim-grace", "10s", "--owner-lease", "1s", "--semaphore", "jobs", "3"}
	a := startSemd(t, args...)
	b := startSemd(t, append(args, "--standby", "yes")...)
	c := dial(t, Options{Addrs: []string{b.addr(), a.addr()}}) // the standby first: followed to the owner
	w, err := NewWeighted(c, "jobs", 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bg(t)
	if !w.TryAcquire(1) {
		t.Fatal("TryAcquire on the owner failed")
	}
	p, err := w.AcquireLease(ctx, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.kill9()
	check := dial(t, Options{Addrs: []string{b.addr()}})
	eventually(t, "the standby took over and the bound permit is attached there", func() bool {
		role, err := check.Do(ctx, "ROLE")
		if err != nil || keyValues(role)["role"] != "owner" {
			return false
		}
		rows, err := check.List(ctx, "HOLDERS jobs")
		if err != nil {
			return false
		}
		for _, h := range rows {
			if h["kind"] == "conn" && h["owner"] != "-" {
				return true
			}
		}
		return false
	})
	if err := w.Acquire(ctx, 1); err != nil {
		t.Fatalf("Acquire on the new owner: %v", err)
	}
	if w.TryAcquire(1) {
		t.Fatal("a fourth permit of 3 was granted after the failover")
	}
	select {
	case <-p.Lost():
		t.Fatalf("the lease was lost in the failover: %v", p.Err())
	default:
	}
	w.Release(2)
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if u := used(t, check, "jobs"); u != 0 {
		t.Fatalf("used %d on the new owner after every release", u)
	}
}
