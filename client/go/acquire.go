// acquire.go: leased acquires with request ids, of one semaphore
// (AcquireLeaseWith) or of several at once (AcquireAll), as libsemc's
// semc-acquire.c does them.
//
// Every leased acquire carries an ID, the caller's or 128 random bits
// drawn here, so that its reply may be lost without losing the lease:
// semd answers a repeat with the same id by the token it granted and
// grants nothing more (PROTOCOL.md, "Idempotent lease acquire"). When the
// reply is lost the request is sent again, on a new connection, with the
// same id, until ctx ends or for Options.FailoverTimeout after the first
// loss (pausing 100 ms, doubling up to 1 s, between tries). Bound
// acquires (Weighted.Acquire) take no id: their permits die with the
// connection, so a lost reply stays ErrLost.

package semd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

const (
	maxParts   = 16 // ACQUIREALL names 2 to 16 semaphores
	maxID      = 64 // bytes of a request id
	retryFirst = 100 * time.Millisecond
	retryMax   = time.Second
)

// Part is one semaphore of an AcquireAll and how many permits of it.
type Part struct {
	Name string
	N    int64
}

// AcquireOptions are the options of a leased acquire.
type AcquireOptions struct {
	// Lease is the lease's length (at least 1 ms); required.
	Lease time.Duration
	// ID is the request id (1 to 64 bytes of A-Z a-z 0-9 _ . : / -).
	// "": 128 random bits in hex, drawn for this call. An acquire that
	// repeats the id of a lease semd still holds (on any connection,
	// after a restart) gets that lease's token and nothing more; with
	// another n it is ErrExists.
	ID string
	// Try: answer at once (TRY, or ACQUIREALL ... TIMEOUT 0): ErrTimeout
	// when the permits are not free now or someone waits.
	Try bool
}

// AcquireLeaseWith is AcquireLease with options: a request id of the
// caller's, or a try that does not wait. See AcquireAll for the retry of
// a lost reply, which every leased acquire gets.
func (w *Weighted) AcquireLeaseWith(ctx context.Context, n int64, opts AcquireOptions) (*Permit, error) {
	return w.c.acquireLease(ctx, []Part{{Name: w.name, N: n}}, opts)
}

// AcquireAll acquires n of each of 2 to 16 distinct semaphores as one
// lease: all of them or none, blocking until granted or ctx is done. It
// waits in every semaphore's queue at once, so two callers that name the
// same semaphores in opposite orders never deadlock. The Permit holds
// the whole grant under one token (a fencing token for each semaphore):
// Release, the keeper's refresh and Lost act on all of it.
//
// The request carries an id (opts.ID, else a drawn one); when its reply
// is lost it is sent again with that id on a new connection, and semd
// answers the token it granted, so a lost reply does not leak a lease.
// ErrLost only when no owner answered for FailoverTimeout after the loss.
func (c *Client) AcquireAll(ctx context.Context, parts []Part, opts AcquireOptions) (*Permit, error) {
	if len(parts) < 2 || len(parts) > maxParts {
		return nil, fmt.Errorf("semd: AcquireAll takes 2 to %d semaphores, not %d", maxParts, len(parts))
	}
	return c.acquireLease(ctx, parts, opts)
}

// drawID returns 128 random bits as 32 hex digits.
func drawID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("semd: cannot draw a request id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// checkParts refuses, before anything is sent, what semd would refuse
// or what would smuggle a second request in (a name with a blank).
func checkParts(parts []Part) error {
	for i, p := range parts {
		if !validSem(p.Name) {
			return fmt.Errorf("semd: invalid semaphore name %q (1 to 200 bytes of A-Z a-z 0-9 _ . : / -)", p.Name)
		}
		if p.N < 1 || p.N > maxN {
			return fmt.Errorf("semd: n %d out of range 1 to %d", p.N, int64(maxN))
		}
		for _, q := range parts[:i] {
			if q.Name == p.Name {
				return fmt.Errorf("semd: semaphore %q named twice", p.Name)
			}
		}
	}
	return nil
}

// acquireLine is the request: TRY or ACQUIRE for one part, ACQUIREALL
// (TIMEOUT 0 for a try) for several; id "" sends none.
func acquireLine(parts []Part, try bool, leaseMs int64, id string) string {
	var b strings.Builder
	switch {
	case len(parts) > 1:
		b.WriteString("ACQUIREALL")
	case try:
		b.WriteString("TRY")
	default:
		b.WriteString("ACQUIRE")
	}
	for _, p := range parts {
		fmt.Fprintf(&b, " %s %d", p.Name, p.N)
	}
	if try && len(parts) > 1 {
		b.WriteString(" TIMEOUT 0")
	}
	fmt.Fprintf(&b, " LEASE %d", leaseMs)
	if id != "" {
		fmt.Fprintf(&b, " ID %s", id)
	}
	return b.String()
}

// acquireLease sends the leased acquire, again after a lost reply (see
// the top of the file), and starts the Permit's keeper and watcher.
func (c *Client) acquireLease(ctx context.Context, parts []Part, opts AcquireOptions) (*Permit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ms := opts.Lease.Milliseconds()
	if ms < 1 || ms > maxN {
		return nil, fmt.Errorf("semd: lease %v out of range 1ms to %d ms", opts.Lease, int64(maxN))
	}
	if err := checkParts(parts); err != nil {
		return nil, err
	}
	id, drawn := opts.ID, false
	if id == "" {
		var err error
		if id, err = drawID(); err != nil {
			return nil, err
		}
		drawn = true
	} else if len(id) > maxID || !validName(id, maxID, false) {
		return nil, fmt.Errorf("semd: invalid request id %q (1 to %d bytes of A-Z a-z 0-9 _ . : / -)", id, maxID)
	}
	s, err := c.takeSession()
	if err != nil {
		return nil, err
	}
	defer c.putSession(s)
	var lostAt time.Time
	delay := retryFirst
	for retries := 0; ; {
		withID := !(drawn && c.idsRefused.Load())
		sendID := ""
		if withID {
			sendID = id
		}
		r, late, err := s.wait(ctx, acquireLine(parts, opts.Try, ms, sendID))
		if err == nil && errors.Is(r.err(), ErrProto) && withID && drawn &&
			lostAt.IsZero() && len(parts) == 1 {
			// A semd before 1.1 does not know ID: a drawn one goes.
			c.idsRefused.Store(true)
			continue
		}
		lost := errors.Is(err, errReplyLost) || (!lostAt.IsZero() && errors.Is(err, ErrConnect))
		if lost && withID {
			if lostAt.IsZero() {
				lostAt = time.Now()
			}
			if c.mayRetry(ctx, lostAt, retries, &delay) {
				retries++
				continue
			}
			return nil, fmt.Errorf("%w (ID %s: not answered when sent again; an acquire with this ID learns the token while the lease lasts)", ErrLost, id)
		}
		if err != nil {
			if tok, terr := tokenOf(late); late.line != "" && terr == nil {
				// Granted as ctx ended: a lease outlives the closed
				// connection, so give it back.
				c.shared.call(context.Background(), fmt.Sprintf("RELEASE %s %d", parts[0].Name, tok), false)
			}
			if errors.Is(err, errReplyLost) {
				return nil, ErrLost
			}
			return nil, err
		}
		tok, err := tokenOf(r)
		if err != nil {
			return nil, err
		}
		return newPermit(c, parts, tok, time.Duration(ms)*time.Millisecond), nil
	}
}

// mayRetry: may a request whose reply was lost be sent again? It pauses
// first (not before the first retry, then 100 ms doubling up to 1 s),
// and says no once ctx is done or FailoverTimeout has passed since the
// loss (a negative FailoverTimeout: one retry).
func (c *Client) mayRetry(ctx context.Context, lostAt time.Time, retries int, delay *time.Duration) bool {
	limit := c.opts.FailoverTimeout
	if limit < 0 {
		return retries == 0
	}
	left := time.Until(lostAt.Add(limit))
	if left <= 0 || ctx.Err() != nil {
		return false
	}
	if retries > 0 {
		pause := *delay
		if pause > left {
			pause = left
		}
		if sleepCtx(ctx, pause) != nil {
			return false
		}
		*delay *= 2
		if *delay > retryMax {
			*delay = retryMax
		}
	}
	return true
}
