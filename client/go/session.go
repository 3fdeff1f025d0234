// session.go: a connection that comes back. A session reconnects when its
// connection is found dead (finding the owner again), sends AUTH and NAME,
// and re-ATTACHes the permits bound to it before any other request; those
// semd will not give back are reported lost. A session that holds bound
// permits reconnects as soon as its connection drops, not at its next
// request, so that it ATTACHes them within semd's reclaim-grace.

package semd

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// grant is a permit bound to a session's connection.
type grant struct {
	sem   string
	token uint64
	n     int64
	s     *session

	once    sync.Once
	lost    chan struct{} // closed when semd would not give it back
	lostErr error
}

func newGrant(sem string, token uint64, n int64, s *session) *grant {
	return &grant{sem: sem, token: token, n: n, s: s, lost: make(chan struct{})}
}

func (g *grant) lose(err error) {
	g.once.Do(func() {
		g.lostErr = err
		close(g.lost)
	})
}

func (g *grant) isLost() bool {
	select {
	case <-g.lost:
		return true
	default:
		return false
	}
}

type session struct {
	c *Client

	// lock is held while (re)connecting and re-attaching, a channel so
	// that a caller waiting for it still honours its context.
	lock chan struct{}

	mu         sync.Mutex
	cn         *conn
	bound      []*grant
	closed     bool
	recovering bool
}

// get returns a live connection, connecting (and re-attaching) if needed.
func (s *session) get(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if cn := s.cn; cn != nil && !cn.isDead() {
		s.mu.Unlock()
		return cn, nil
	}
	s.mu.Unlock()
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.lock }()
	for tries := 0; ; tries++ {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if cn := s.cn; cn != nil && !cn.isDead() {
			s.mu.Unlock()
			return cn, nil // another caller reconnected meanwhile
		}
		s.cn = nil
		s.mu.Unlock()
		cn, err := s.c.search(ctx, s.onDead)
		if err != nil {
			return nil, err
		}
		err = s.reattach(ctx, cn)
		if err == nil {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				cn.close()
				return nil, ErrClosed
			}
			s.cn = cn
			s.mu.Unlock()
			return cn, nil
		}
		cn.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if tries >= 3 {
			return nil, fmt.Errorf("%w: %v", ErrConnect, err)
		}
		// A standby (it did nothing), or the connection failed again:
		// search again, the hint learnt.
	}
}

// reattach ATTACHes every bound permit on a new connection. An ERR answer
// other than STANDBY means semd will not give it back: lost. A failed
// connection or a standby stops it; the rest wait for the next one.
func (s *session) reattach(ctx context.Context, cn *conn) error {
	s.mu.Lock()
	todo := append([]*grant(nil), s.bound...)
	s.mu.Unlock()
	for _, g := range todo {
		p, err := cn.send(fmt.Sprintf("ATTACH %s %d", g.sem, g.token), false)
		if err != nil {
			return err
		}
		var res result
		t := time.NewTimer(s.c.opts.DialTimeout)
		select {
		case res = <-p.ch:
		case <-t.C:
			res.err = errReplyLost
		case <-ctx.Done():
			res.err = ctx.Err()
		}
		t.Stop()
		if res.err != nil {
			return res.err
		}
		if res.r.ok() {
			continue
		}
		err = res.r.err()
		if e, ok := err.(*Error); ok && e.Code == CodeStandby {
			s.c.learnStandby(res.r.line)
			return &errStandby{line: res.r.line}
		}
		s.removeBound(g)
		s.c.reportLost(g, err)
	}
	return nil
}

// onDead runs when one of this session's connections ends: a session
// holding bound permits reconnects at once to take them back.
func (s *session) onDead(cn *conn) {
	s.mu.Lock()
	// Only the session's current connection: not a probe that found a
	// standby, nor one that get() has replaced already.
	if s.closed || s.recovering || len(s.bound) == 0 || s.cn != cn {
		s.mu.Unlock()
		return
	}
	s.recovering = true
	s.mu.Unlock()
	go s.recover()
}

// recover reconnects (retrying with the backoff even with one address, as
// a restart takes a moment) until FailoverTimeout; permits still not
// attached then are lost.
func (s *session) recover() {
	limit := s.c.opts.FailoverTimeout
	if limit <= 0 {
		limit = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	delay := backoffMin
	var err error
	for {
		if _, err = s.get(ctx); err == nil || err == ErrClosed || ctx.Err() != nil {
			break
		}
		if sleepCtx(ctx, delay) != nil {
			break
		}
		if delay *= 2; delay > backoffMax {
			delay = backoffMax
		}
	}
	s.mu.Lock()
	s.recovering = false
	var lost []*grant
	if err != nil && !s.closed {
		lost = s.bound
		s.bound = nil
	}
	s.mu.Unlock()
	for _, g := range lost {
		s.c.reportLost(g, fmt.Errorf("%w: %v", ErrConnect, err))
	}
}

// call sends a request that semd answers at once and waits for its reply
// (not cancellable once sent: its outcome must be known). A request that
// could not be sent, or that a standby refused, is sent again; one whose
// reply was lost is not: ErrNoReply.
func (s *session) call(ctx context.Context, line string, listing bool) (reply, error) {
	for tries := 0; ; tries++ {
		cn, err := s.get(ctx)
		if err != nil {
			return reply{}, err
		}
		p, err := cn.send(line, listing)
		if err == errNotSent && tries < 5 {
			continue
		}
		if err != nil {
			return reply{}, fmt.Errorf("%w: %v", ErrConnect, err)
		}
		res := <-p.ch
		if res.err != nil {
			return reply{}, ErrNoReply
		}
		if s.refusedByStandby(cn, res.r) && tries < 5 {
			continue
		}
		return res.r, nil
	}
}

// refusedByStandby: the reply is ERR STANDBY (nothing was done); the
// connection is dropped so that the next try finds the owner.
func (s *session) refusedByStandby(cn *conn, r reply) bool {
	e, ok := r.err().(*Error)
	if !ok || e.Code != CodeStandby {
		return false
	}
	s.c.learnStandby(r.line)
	cn.close()
	return true
}

// wait sends a request that may block (ACQUIRE, WATCH) and waits for its
// reply or ctx. On ctx's end the wait is cancelled (the connection is
// half-closed, so semd drops the waiter) and ctx.Err() returned, with the
// reply semd had already sent, if any (late.line != ""). A reply lost to
// a failed connection is errReplyLost.
func (s *session) wait(ctx context.Context, line string) (r reply, late reply, err error) {
	for tries := 0; ; tries++ {
		cn, err := s.get(ctx)
		if err != nil {
			return reply{}, reply{}, err
		}
		p, err := cn.send(line, false)
		if err == errNotSent && tries < 5 {
			continue
		}
		if err != nil {
			return reply{}, reply{}, fmt.Errorf("%w: %v", ErrConnect, err)
		}
		select {
		case res := <-p.ch:
			if res.err != nil {
				if s.isClosed() {
					return reply{}, reply{}, ErrClosed
				}
				return reply{}, reply{}, errReplyLost
			}
			if s.refusedByStandby(cn, res.r) && tries < 5 {
				continue
			}
			return res.r, reply{}, nil
		case <-ctx.Done():
			if lr, got := cn.cancel(p, cancelGrace); got {
				late = lr
			}
			return reply{}, late, ctx.Err()
		}
	}
}

func (s *session) addBound(g *grant) {
	s.mu.Lock()
	s.bound = append(s.bound, g)
	s.mu.Unlock()
}

// removeBound forgets g (released, or lost); false if it was not there.
func (s *session) removeBound(g *grant) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.bound {
		if b == g {
			s.bound = append(s.bound[:i], s.bound[i+1:]...)
			return true
		}
	}
	return false
}

func (s *session) holds() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bound) > 0
}

func (s *session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	cn := s.cn
	s.cn = nil
	s.mu.Unlock()
	if cn != nil {
		cn.close()
	}
}
