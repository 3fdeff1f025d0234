// client.go: Client, its addresses and how it finds the owner among them
// (following "ERR STANDBY owner=" and lost connections, with a capped
// backoff), and sessions: a connection that reconnects, sends AUTH and
// NAME again, and re-ATTACHes the permits bound to it, as libsemc(3) does.
//
// A Client has one shared session for requests that semd answers at once
// (TRY, RELEASE, REFRESH, CREATE, ...), pipelined by any number of
// goroutines, and a pool of sessions for requests that wait (ACQUIRE,
// WATCH): each waits on a connection of its own, so a cancelled context
// closes only that wait. A permit bound to a connection (no lease) stays
// with the session that acquired it until it is released.
//
// The lost-reply rule: a request whose reply was lost (sent, then the
// connection failed) is never sent again, to any address; the caller gets
// ErrNoReply, or ErrLost for an acquire. Only a request that could not be
// sent, or that a standby refused (it did nothing), is sent again.

package semd

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultAddr is where Dial connects when given no address and SEMD_HOSTS
// is empty.
const DefaultAddr = "127.0.0.1:7313"

const (
	backoffMin      = 100 * time.Millisecond
	backoffMax      = time.Second
	redirectsMax    = 2 // per round: standbys may disagree
	maxIdleSessions = 64
	cancelGrace     = 2 * time.Second
)

// Options configure a Client; the zero value means every default.
type Options struct {
	// Addrs: "host:port" or "host" (port 7313), or comma-separated lists
	// of them. None: SEMD_HOSTS, else 127.0.0.1:7313.
	Addrs []string
	// Password is sent with AUTH on every connection. "": SEMD_PASSWORD.
	Password string
	// Name labels every connection (NAME; CLIENTS and HOLDERS show it).
	// "": SEMD_NAME, else program@host:pid.
	Name string
	// FailoverTimeout bounds the search for an owner when a connection is
	// lost or a standby answers (0: 15 s; negative: one pass).
	FailoverTimeout time.Duration
	// DialTimeout bounds each connection attempt (0: 5 s).
	DialTimeout time.Duration
	// OnLost is told of each bound permit semd would not give back after
	// a reconnect (semd restarted without persistence, reclaim-grace ran
	// out, no owner found in time). It runs on its own goroutine.
	OnLost func(LostPermit)
}

// LostPermit is a permit bound to a lost connection that could not be
// taken back.
type LostPermit struct {
	Sem   string
	Token uint64
	N     int64
	Err   error // why: semd's refusal of ATTACH, or ErrConnect
}

// Client is a connection to semd shared by any number of goroutines.
type Client struct {
	opts Options
	name string

	amu         sync.Mutex // guards the address list and what was learnt
	addrs       []string
	cur         int
	ownerHint   string
	seenStandby bool

	shared *session

	idsRefused atomic.Bool // a semd before 1.1 refused ID: draw none

	pmu    sync.Mutex
	pool   []*session
	all    map[*session]struct{} // every session, to close them
	closed bool
}

// Dial connects to semd: to the addresses given, else those in SEMD_HOSTS,
// else 127.0.0.1:7313. With several addresses (an owner and its standbys)
// it finds the owner, as every later reconnect does.
func Dial(ctx context.Context, addrs ...string) (*Client, error) {
	return DialOptions(ctx, Options{Addrs: addrs})
}

// DialOptions is Dial with every setting.
func DialOptions(ctx context.Context, opts Options) (*Client, error) {
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.shared.get(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(opts Options) (*Client, error) {
	list := opts.Addrs
	if len(list) == 0 {
		if env := os.Getenv("SEMD_HOSTS"); env != "" {
			list = []string{env}
		} else {
			list = []string{DefaultAddr}
		}
	}
	var addrs []string
	for _, item := range list {
		for _, a := range strings.Split(item, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			norm, err := normAddr(a)
			if err != nil {
				return nil, err
			}
			addrs = append(addrs, norm)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("semd: no address in %q", list)
	}
	if opts.Password == "" {
		opts.Password = os.Getenv("SEMD_PASSWORD")
	}
	if opts.FailoverTimeout == 0 {
		opts.FailoverTimeout = 15 * time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	name := opts.Name
	if name == "" {
		name = os.Getenv("SEMD_NAME")
	}
	if name == "" {
		name = defaultName()
	}
	if !validLabel(name) {
		return nil, fmt.Errorf("semd: invalid connection name %q (1 to 64 bytes of A-Z a-z 0-9 _ . : / - @)", name)
	}
	c := &Client{opts: opts, name: name, addrs: addrs, all: map[*session]struct{}{}}
	c.shared = c.newSession()
	return c, nil
}

// normAddr gives "host:port", adding port 7313 when there is none.
func normAddr(a string) (string, error) {
	if _, port, err := net.SplitHostPort(a); err == nil {
		if p, perr := strconv.Atoi(port); perr != nil || p < 1 || p > 65535 {
			return "", fmt.Errorf("semd: invalid port in address %q", a)
		}
		return a, nil
	}
	h := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
	if h == "" {
		return "", fmt.Errorf("semd: invalid address %q", a)
	}
	return net.JoinHostPort(h, "7313"), nil
}

func validName(s string, max int, at bool) bool {
	if len(s) < 1 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' ||
			b == '_' || b == '.' || b == ':' || b == '/' || b == '-' || at && b == '@') {
			return false
		}
	}
	return true
}

func validSem(s string) bool   { return validName(s, 200, false) }
func validLabel(s string) bool { return validName(s, 64, true) }

// defaultName is program@host:pid, in the label's alphabet.
func defaultName() string {
	host, _ := os.Hostname()
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r < 128 && validName(string(r), 1, false) {
				return r
			}
			return '_'
		}, s)
	}
	prog := clean(filepath.Base(os.Args[0]))
	tail := "@" + clean(host) + ":" + strconv.Itoa(os.Getpid())
	if len(prog)+len(tail) > 64 {
		if len(tail) > 40 {
			tail = tail[:40]
		}
		if len(prog) > 64-len(tail) {
			prog = prog[:64-len(tail)]
		}
	}
	if prog == "" {
		prog = "go"
	}
	return prog + tail
}

// Close closes every connection: semd releases the permits bound to them
// (leases stay until they are released or run out).
func (c *Client) Close() error {
	c.pmu.Lock()
	if c.closed {
		c.pmu.Unlock()
		return nil
	}
	c.closed = true
	all := c.all
	c.all = nil
	c.pool = nil
	c.pmu.Unlock()
	for s := range all {
		s.close()
	}
	return nil
}

// Verbs whose reply is "OK <k>" and k lines, and verbs that may wait or
// change the connection itself, which the shared connection refuses.
var (
	listingVerbs = map[string]bool{"HOLDERS": true, "WAITERS": true, "LIST": true, "STATS": true, "CLIENTS": true}
	ownVerbs     = map[string]bool{"ACQUIRE": true, "ACQUIREALL": true, "WATCH": true, "QUIT": true, "AUTH": true, "NAME": true}
)

// sharedVerb checks a request for the shared connection: its verb, and
// whether its reply is a listing.
func sharedVerb(request string) (listing bool, err error) {
	f := strings.Fields(request)
	if len(f) == 0 || strings.ContainsAny(request, "\r\n") {
		return false, fmt.Errorf("semd: not one request line: %q", request)
	}
	verb := strings.ToUpper(f[0])
	if ownVerbs[verb] {
		return false, fmt.Errorf("semd: %s waits or changes the connection: use Weighted or Options, not Do", verb)
	}
	return listingVerbs[verb], nil
}

// Do sends one request line on the shared connection and returns semd's
// reply line: for what this package has no method for (INFO, CHECK,
// REVOKE, ...). An "ERR" reply is returned as an *Error, "TIMEOUT" as
// ErrTimeout, with the line. A listing's lines are read and dropped (List
// returns them); requests that wait (ACQUIRE, WATCH) or change the
// connection (AUTH, NAME, QUIT) are refused.
func (c *Client) Do(ctx context.Context, request string) (string, error) {
	listing, err := sharedVerb(request)
	if err != nil {
		return "", err
	}
	r, err := c.shared.call(ctx, request, listing)
	if err != nil {
		return "", err
	}
	return r.line, r.err()
}

// List sends a listing request (HOLDERS, WAITERS, LIST, STATS, CLIENTS)
// and returns its lines, each as a map of its key=value words.
func (c *Client) List(ctx context.Context, request string) ([]map[string]string, error) {
	if listing, err := sharedVerb(request); err != nil || !listing {
		if err == nil {
			err = fmt.Errorf("semd: %q is not a listing (HOLDERS, WAITERS, LIST, STATS, CLIENTS)", request)
		}
		return nil, err
	}
	r, err := c.shared.call(ctx, request, true)
	if err != nil {
		return nil, err
	}
	if err := r.err(); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(r.lines))
	for _, ln := range r.lines {
		out = append(out, keyValues(ln))
	}
	return out, nil
}

// keyValues splits "k=v k2=v2" words into a map.
func keyValues(line string) map[string]string {
	m := map[string]string{}
	for _, w := range strings.Fields(line) {
		if k, v, ok := strings.Cut(w, "="); ok {
			m[k] = v
		}
	}
	return m
}

// --- finding the owner ---

// many: a failed attempt is followed by a search (several addresses, or
// a standby met); otherwise one attempt is made, as libsemc does.
func (c *Client) many() bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	return len(c.addrs) > 1 || c.seenStandby
}

// learnStandby records an ERR STANDBY reply: standbys exist, and the
// owner it names (added to the addresses if new).
func (c *Client) learnStandby(line string) {
	c.amu.Lock()
	defer c.amu.Unlock()
	c.seenStandby = true
	c.ownerHint = ""
	owner := keyValues(line)["owner"]
	if owner == "" || owner == "-" {
		return
	}
	norm, err := normAddr(owner)
	if err != nil {
		return
	}
	c.ownerHint = norm
	for _, a := range c.addrs {
		if a == norm {
			return
		}
	}
	c.addrs = append(c.addrs, norm)
}

// errStandby: the daemon reached is a standby (it did nothing).
type errStandby struct{ line string }

func (e *errStandby) Error() string { return "semd: " + e.line }

// open connects to addr and makes it ready: AUTH, then NAME, whose answer
// also says whether addr serves as owner (a standby refuses NAME).
func (c *Client) open(ctx context.Context, addr string, onDead func(*conn)) (*conn, error) {
	timeout := c.opts.DialTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, ctx.Err()
		}
	}
	cn, err := dialConn(addr, timeout, onDead)
	if err != nil {
		return nil, err
	}
	ask := func(line string) (reply, error) {
		p, err := cn.send(line, false)
		if err != nil {
			if serr := cn.strayErr(); serr != nil {
				return reply{}, serr // refused at once: LIMIT, protected mode
			}
			return reply{}, err
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case res := <-p.ch:
			if res.err != nil {
				if serr := cn.strayErr(); serr != nil {
					return reply{}, serr
				}
			}
			return res.r, res.err
		case <-t.C:
			cn.close()
			return reply{}, fmt.Errorf("semd: %s did not answer within %v", addr, timeout)
		case <-ctx.Done():
			cn.close()
			return reply{}, ctx.Err()
		}
	}
	if c.opts.Password != "" {
		r, err := ask("AUTH " + c.opts.Password)
		if err == nil && !r.ok() {
			err = r.err()
		}
		if err != nil {
			cn.close()
			return nil, err
		}
	}
	r, err := ask("NAME " + c.name)
	if err != nil {
		cn.close()
		return nil, err
	}
	if e, ok := r.err().(*Error); ok && e.Code == CodeStandby {
		c.learnStandby(r.line)
		cn.close()
		return nil, &errStandby{line: r.line}
	} else if ok && e.Code != CodeProto {
		cn.close()
		return nil, e
	}
	// OK, or ERR PROTO from a 1.0 semd that has no NAME: an owner.
	return cn, nil
}

// search finds an owner: the standby's hint first, else the addresses in
// turn, pausing after each round without an owner (100 ms doubling to
// 1 s) until FailoverTimeout; one attempt when !many(). ErrAuth and
// ctx's errors end it at once.
func (c *Client) search(ctx context.Context, onDead func(*conn)) (*conn, error) {
	start := time.Now()
	delay := backoffMin
	c.amu.Lock()
	left := len(c.addrs)
	c.amu.Unlock()
	redirects := 0
	rounds := 0
	for {
		c.amu.Lock()
		addr := c.addrs[c.cur]
		hint := c.ownerHint
		c.amu.Unlock()
		cn, err := c.open(ctx, addr, onDead)
		if err == nil {
			return cn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if e, ok := err.(*Error); ok {
			return nil, e // AUTH or LIMIT: searching does not help
		}
		if !c.many() {
			return nil, fmt.Errorf("%w: %s: %v", ErrConnect, addr, err)
		}
		elapsed := time.Since(start)
		if c.opts.FailoverTimeout > 0 && elapsed >= c.opts.FailoverTimeout {
			return nil, fmt.Errorf("%w: no owner within %v (%d rounds); last %s: %v",
				ErrConnect, c.opts.FailoverTimeout, rounds+1, addr, err)
		}
		c.amu.Lock()
		if _, sb := err.(*errStandby); sb && hint != "" && hint != addr && redirects < redirectsMax {
			for i, a := range c.addrs {
				if a == hint {
					c.cur = i
				}
			}
			redirects++
			c.amu.Unlock()
			continue
		}
		c.cur = (c.cur + 1) % len(c.addrs)
		n := len(c.addrs)
		c.amu.Unlock()
		if left > 1 {
			left--
			continue
		}
		rounds++
		if c.opts.FailoverTimeout < 0 {
			return nil, fmt.Errorf("%w: no owner among %d addresses (one pass); last %s: %v",
				ErrConnect, n, addr, err)
		}
		pause := delay
		if rest := c.opts.FailoverTimeout - elapsed; rest < pause {
			pause = rest
		}
		if err := sleepCtx(ctx, pause); err != nil {
			return nil, err
		}
		if delay *= 2; delay > backoffMax {
			delay = backoffMax
		}
		left = n
		redirects = 0
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// --- the pool of sessions for waiting requests ---

func (c *Client) newSession() *session {
	s := &session{c: c, lock: make(chan struct{}, 1)}
	c.pmu.Lock()
	if c.all != nil {
		c.all[s] = struct{}{}
	}
	c.pmu.Unlock()
	return s
}

// takeSession gives an idle session (or a new one) for a waiting request.
func (c *Client) takeSession() (*session, error) {
	c.pmu.Lock()
	if c.closed {
		c.pmu.Unlock()
		return nil, ErrClosed
	}
	if n := len(c.pool); n > 0 {
		s := c.pool[n-1]
		c.pool = c.pool[:n-1]
		c.pmu.Unlock()
		return s, nil
	}
	c.pmu.Unlock()
	return c.newSession(), nil
}

// putSession returns a session that holds nothing to the pool (or closes
// it when the pool is full or the client closed).
func (c *Client) putSession(s *session) {
	c.pmu.Lock()
	if !c.closed && len(c.pool) < maxIdleSessions && !s.holds() {
		c.pool = append(c.pool, s)
		c.pmu.Unlock()
		return
	}
	if c.all != nil {
		delete(c.all, s)
	}
	c.pmu.Unlock()
	s.close()
}

func (c *Client) reportLost(g *grant, why error) {
	g.lose(why)
	if f := c.opts.OnLost; f != nil {
		go f(LostPermit{Sem: g.sem, Token: g.token, N: g.n, Err: why})
	}
}
