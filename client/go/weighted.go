// weighted.go: Weighted, a drop-in for golang.org/x/sync/semaphore's
// Weighted whose permits semd holds for every process on every host.
//
// The semantics are x/sync's, kept by semd's engine: waiters are served
// first-in first-out, a big request at the head blocks smaller ones behind
// it (it is never starved), a cancelled context removes its waiter (and
// those behind it are looked at again), TryAcquire fails while anyone
// waits, and Release of more than is held panics. The documented
// difference: semd grants are released whole, so Release(n) releases
// whole grants of this Weighted, oldest first, whose sizes add up to n,
// and panics on a release that would have to split one.

package semd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// Weighted is a semaphore of a fixed capacity kept by semd under a name.
// Its methods may be called by any number of goroutines.
type Weighted struct {
	c        *Client
	name     string
	capacity int64

	mu     sync.Mutex
	grants []*grant // held, oldest first
}

// NewWeighted returns the semaphore name of the given capacity (1 to
// 2^31-1), creating it in semd if absent. A semaphore of that name with
// another capacity is an error (ErrExists).
func NewWeighted(c *Client, name string, capacity int64) (*Weighted, error) {
	if !validSem(name) {
		return nil, fmt.Errorf("semd: invalid semaphore name %q (1 to 200 bytes of A-Z a-z 0-9 _ . : / -)", name)
	}
	if capacity < 1 || capacity > maxN {
		return nil, fmt.Errorf("semd: capacity %d out of range 1 to %d", capacity, int64(maxN))
	}
	r, err := c.shared.call(context.Background(), fmt.Sprintf("CREATE %s %d", name, capacity), false)
	if err == nil {
		err = r.err()
	}
	if err != nil {
		return nil, fmt.Errorf("semd: CREATE %s %d: %w", name, capacity, err)
	}
	return &Weighted{c: c, name: name, capacity: capacity}, nil
}

const maxN = 1<<31 - 1

// Name is the semaphore's name in semd.
func (w *Weighted) Name() string { return w.name }

// Acquire acquires n permits, blocking until they are granted or ctx is
// done. On success it returns nil; on failure ctx.Err() (nothing is held),
// or an error of semd or of the connection: ErrLost when the reply was
// lost (a permit may have been granted and lost). If ctx is already done,
// Acquire fails even when permits are available, as x/sync does. A
// request for more than the capacity waits for ctx, as x/sync's does.
//
// The wait runs on a connection of its own, to which the permits are
// then bound: if the process dies, semd releases them.
func (w *Weighted) Acquire(ctx context.Context, n int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	if n > maxN {
		<-ctx.Done()
		return ctx.Err()
	}
	s, err := w.c.takeSession()
	if err != nil {
		return err
	}
	// A grant made as the wait was cancelled (the late reply) was bound
	// to the connection the cancel closed: semd has released it.
	r, _, err := s.wait(ctx, fmt.Sprintf("ACQUIRE %s %d", w.name, n))
	if err != nil {
		w.c.putSession(s)
		if errors.Is(err, errReplyLost) {
			return ErrLost
		}
		return err
	}
	tok, err := tokenOf(r)
	if err != nil {
		w.c.putSession(s)
		if errors.Is(err, ErrRange) {
			<-ctx.Done() // x/sync: n > size blocks until ctx is done
			return ctx.Err()
		}
		return err
	}
	w.hold(newGrant(w.name, tok, n, s))
	return nil
}

// TryAcquire acquires n permits without blocking: true on success, false
// when they are not available now or someone is waiting (or semd could
// not be asked). The permits are bound to the client's shared connection.
func (w *Weighted) TryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	if n > maxN {
		return false
	}
	r, err := w.c.shared.call(context.Background(), fmt.Sprintf("TRY %s %d", w.name, n), false)
	if err != nil {
		return false
	}
	tok, err := tokenOf(r)
	if err != nil {
		return false
	}
	w.hold(newGrant(w.name, tok, n, w.c.shared))
	return true
}

func (w *Weighted) hold(g *grant) {
	g.s.addBound(g)
	w.mu.Lock()
	w.grants = append(w.grants, g)
	w.mu.Unlock()
}

// Release releases n permits: whole grants of this Weighted, oldest first
// (the oldest grant of exactly n if there is one), whose sizes add up to
// n. It panics if fewer than n are held ("released more than held", as
// x/sync) or if n cannot be made of whole grants. It returns once semd
// has answered, so the permits are free for others when it returns.
// A grant semd could not give back after a reconnect is dropped here
// without a request.
func (w *Weighted) Release(n int64) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	pick, err := pickGrants(w.grants, n)
	if err != nil {
		w.mu.Unlock()
		panic(err)
	}
	keep := w.grants[:0]
	for _, g := range w.grants {
		if !pick[g] {
			keep = append(keep, g)
		}
	}
	for i := len(keep); i < len(w.grants); i++ {
		w.grants[i] = nil
	}
	w.grants = keep
	w.mu.Unlock()
	for g := range pick {
		w.release(g)
	}
}

// pickGrants chooses the grants Release(n) frees: the oldest grant of
// exactly n, else grants oldest first, skipping any that would overshoot.
func pickGrants(gs []*grant, n int64) (map[*grant]bool, error) {
	var total int64
	for _, g := range gs {
		total += g.n
	}
	if total < n {
		return nil, errors.New("semaphore: released more than held")
	}
	for _, g := range gs {
		if g.n == n {
			return map[*grant]bool{g: true}, nil
		}
	}
	pick := map[*grant]bool{}
	var sum int64
	for _, g := range gs {
		if sum+g.n <= n {
			pick[g] = true
			sum += g.n
		}
	}
	if sum != n {
		return nil, fmt.Errorf("semd: Release(%d) would split a grant: semd releases whole grants (held: %s)", n, sizes(gs))
	}
	return pick, nil
}

func sizes(gs []*grant) string {
	out := ""
	for i, g := range gs {
		if i > 0 {
			out += "+"
		}
		out += strconv.FormatInt(g.n, 10)
	}
	return out
}

// release sends RELEASE for one grant on the connection it is bound to,
// then gives a pooled session back. A lost grant needs no request; a
// refusal (NOTHELD: revoked) or a lost reply leaves nothing to do: a
// permit bound to a connection that failed is freed by semd.
func (w *Weighted) release(g *grant) {
	s := g.s
	if s.removeBound(g) && !g.isLost() {
		s.call(context.Background(), fmt.Sprintf("RELEASE %s %d", g.sem, g.token), false)
	}
	if s != w.c.shared {
		w.c.putSession(s)
	}
}

// tokenOf reads "OK <token>"; TIMEOUT is ErrTimeout, ERR an *Error.
func tokenOf(r reply) (uint64, error) {
	if err := r.err(); err != nil {
		return 0, err
	}
	ws := r.words()
	if len(ws) < 1 {
		return 0, ErrBadReply
	}
	tok, err := strconv.ParseUint(ws[0], 10, 64)
	if err != nil {
		return 0, ErrBadReply
	}
	return tok, nil
}
