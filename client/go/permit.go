// permit.go: leases, what only semd has. A Permit is a lease: it outlives
// its connection, and a keeper goroutine REFRESHes it a third of the lease
// after each refresh it sent, so that two refreshes can fail in a row
// before it would run out. A second goroutine WATCHes it on a connection
// of its own, so the holder learns within a round trip that it was
// revoked or expired (Lost() is closed, Err() says why), without polling.

package semd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrPermitLost wraps the reason a Permit was lost.
var ErrPermitLost = errors.New("semd: permit lost")

const watchRetry = 500 * time.Millisecond

// Permit is a lease held in semd, kept alive until Release.
type Permit struct {
	c      *Client
	sem    string
	token  uint64
	n      int64
	leaseD time.Duration
	parts  []Part // every semaphore of the grant (one, or AcquireAll's)

	lostCh   chan struct{}
	lostOnce sync.Once
	emu      sync.Mutex
	err      error

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// AcquireLease acquires n permits as a lease of the given length (at
// least 1 ms), blocking until granted or ctx is done. The lease outlives
// the connection and the process; a keeper refreshes it until Release.
// A lease granted just as ctx ended is released again. The request
// carries a drawn request id, so a lost reply is asked again on a new
// connection and answered with the same token (see AcquireAll); ErrLost
// only when that failed for FailoverTimeout.
func (w *Weighted) AcquireLease(ctx context.Context, n int64, lease time.Duration) (*Permit, error) {
	return w.AcquireLeaseWith(ctx, n, AcquireOptions{Lease: lease})
}

// newPermit holds a granted lease (of every part, under one token) and
// starts its keeper and watcher; either semaphore names the whole grant.
func newPermit(c *Client, parts []Part, token uint64, lease time.Duration) *Permit {
	p := &Permit{c: c, sem: parts[0].Name, token: token, n: parts[0].N, leaseD: lease,
		parts: append([]Part(nil), parts...), lostCh: make(chan struct{}), stop: make(chan struct{})}
	p.wg.Add(2)
	go p.keep()
	go p.watch()
	return p
}

// Token is the grant's fencing token: unique and increasing for the
// semaphore, across restarts. Pass it to the resource the permit guards.
func (p *Permit) Token() uint64 { return p.token }

// N is the number of permits held (of the first semaphore, for AcquireAll).
func (p *Permit) N() int64 { return p.n }

// Parts are the semaphores the grant holds and how many of each.
func (p *Permit) Parts() []Part { return append([]Part(nil), p.parts...) }

// Lost is closed when the lease is lost: revoked, expired, released by
// someone else, or not refreshed in time. The holder must stop.
func (p *Permit) Lost() <-chan struct{} { return p.lostCh }

// Err says why the permit was lost (wrapping ErrPermitLost), nil before.
func (p *Permit) Err() error {
	p.emu.Lock()
	defer p.emu.Unlock()
	return p.err
}

func (p *Permit) lose(why error) {
	select {
	case <-p.stop:
		return // released by its holder: nothing lost
	default:
	}
	p.lostOnce.Do(func() {
		p.emu.Lock()
		p.err = fmt.Errorf("%w: %s %d: %v", ErrPermitLost, p.sem, p.token, why)
		p.emu.Unlock()
		close(p.lostCh)
	})
}

// Release stops the keeper and releases the lease. A lease already lost
// is not released again; ErrNotHeld then.
func (p *Permit) Release() error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.wg.Wait()
	select {
	case <-p.lostCh:
		return p.Err()
	default:
	}
	r, err := p.c.shared.call(context.Background(), fmt.Sprintf("RELEASE %s %d", p.sem, p.token), false)
	if err != nil {
		return err
	}
	return r.err()
}

// keep refreshes the lease every third of it. A refusal (NOTHELD) loses
// it at once; a connection that failed is retried soon, until the lease
// would have ended by this process's clock since the last refresh sent
// and answered (a restart or a failover resumes leases). That is never
// later than semd's own end of the lease: semd counts a lease from when
// it handled the REFRESH, which is after this process sent it.
func (p *Permit) keep() {
	defer p.wg.Done()
	interval := p.leaseD / 3
	if interval < time.Millisecond {
		interval = time.Millisecond
	}
	lastOK := time.Now()
	next := interval
	for {
		t := time.NewTimer(next)
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-p.lostCh:
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), p.leaseD)
		r, err := p.c.shared.call(ctx, fmt.Sprintf("REFRESH %s %d %d", p.sem, p.token, p.leaseD.Milliseconds()), false)
		cancel()
		if err == nil {
			err = r.err()
			if err == nil {
				lastOK = sent
				next = interval
				continue
			}
			p.lose(err)
			return
		}
		if time.Since(lastOK) >= p.leaseD {
			p.lose(fmt.Errorf("not refreshed for the whole lease: %v", err))
			return
		}
		next = interval / 4
	}
}

// watch waits in WATCH on a connection of its own until the grant ends
// (then the permit is lost) or Release; a failed connection is watched
// again after a pause, so it follows a restart or failover.
func (p *Permit) watch() {
	defer p.wg.Done()
	s := p.c.newSession()
	defer func() {
		p.c.pmu.Lock()
		if p.c.all != nil {
			delete(p.c.all, s)
		}
		p.c.pmu.Unlock()
		s.close()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
		case <-p.lostCh:
		}
		cancel()
	}()
	for ctx.Err() == nil {
		r, _, err := s.wait(ctx, fmt.Sprintf("WATCH %s %d", p.sem, p.token))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			sleepCtx(ctx, watchRetry)
			continue
		}
		if r.ok() {
			p.lose(fmt.Errorf("the grant ended: %s", strings.Join(r.words(), " ")))
			return
		}
		if errors.Is(r.err(), ErrNotHeld) {
			p.lose(r.err())
			return
		}
		if errors.Is(r.err(), ErrProto) {
			return // a semd before 1.1: refreshes alone tell
		}
		if r.timeout() {
			continue
		}
		sleepCtx(ctx, watchRetry)
	}
}
