// conn.go: one TCP connection speaking semd's line protocol. Requests are
// pipelined: any number of goroutines may send at once, each request's
// reply is queued for it in send order, and one reader goroutine matches
// replies to requests in order (semd answers strictly in order, one reply
// per request; a listing's "OK <k>" brings k more lines).

package semd

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// reply is one answer: its first line and, for a listing, the k lines
// that followed "OK <k>".
type reply struct {
	line  string
	lines []string
}

func (r reply) ok() bool      { return r.line == "OK" || strings.HasPrefix(r.line, "OK ") }
func (r reply) timeout() bool { return r.line == "TIMEOUT" }
func (r reply) isErr() bool   { return strings.HasPrefix(r.line, "ERR ") || r.line == "ERR" }

// words of an OK reply after "OK".
func (r reply) words() []string { return strings.Fields(strings.TrimPrefix(r.line, "OK")) }

// err is the reply as a Go error: nil for OK, ErrTimeout, or an *Error.
func (r reply) err() error {
	switch {
	case r.ok():
		return nil
	case r.timeout():
		return ErrTimeout
	case r.isErr():
		return parseErr(r.line)
	}
	return ErrBadReply
}

// pending is a request sent and waiting for its reply.
type pending struct {
	listing bool
	ch      chan result // buffered: the reader never blocks on it
}

type result struct {
	r   reply
	err error // errReplyLost when the connection failed first
}

// Internal outcomes that the session turns into the public errors.
var (
	errNotSent   = errors.New("semd: the connection was closed before the request was sent")
	errReplyLost = errors.New("semd: the connection failed before the reply came")
)

type conn struct {
	nc   net.Conn
	addr string

	wmu sync.Mutex // one writer at a time: a request's order is its queue order

	mu     sync.Mutex
	queue  []*pending
	dead   bool
	stray  string      // a line that came with no request waiting
	onDead func(*conn) // called once, by the reader, when the connection ends

	done chan struct{} // closed when the reader has ended
}

// dialConn opens a connection; the reader starts at once.
func dialConn(addr string, timeout time.Duration, onDead func(*conn)) (*conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, addr: addr, onDead: onDead, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// send writes one request line. errNotSent when nothing was written (the
// connection is dead): sending it elsewhere is safe.
func (c *conn) send(line string, listing bool) (*pending, error) {
	p := &pending{listing: listing, ch: make(chan result, 1)}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return nil, errNotSent
	}
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	n, err := c.nc.Write([]byte(line + "\n"))
	if err != nil {
		if n == 0 {
			// Nothing left this host: take it back off the queue
			// (it is the last one, the write lock is ours).
			c.mu.Lock()
			for i := len(c.queue) - 1; i >= 0; i-- {
				if c.queue[i] == p {
					c.queue = append(c.queue[:i], c.queue[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
			c.close()
			return nil, errNotSent
		}
		c.close() // part of it went: the reader reports the reply lost
	}
	return p, nil
}

// read matches reply lines to the queue until the connection ends, then
// fails every request still waiting with errReplyLost.
func (c *conn) read() {
	br := bufio.NewReaderSize(c.nc, 16384)
	for {
		line, err := readLine(br)
		if err != nil {
			break
		}
		c.mu.Lock()
		if len(c.queue) == 0 {
			// A line nobody asked for: semd's "ERR LIMIT" or "ERR
			// AUTH protected mode" as it closes a new connection,
			// or not a semd. Kept for open() to report.
			c.stray = line
			c.mu.Unlock()
			break
		}
		p := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.mu.Unlock()
		r := reply{line: line}
		if p.listing && strings.HasPrefix(line, "OK ") {
			k, perr := strconv.Atoi(strings.Fields(line)[1])
			if perr != nil || k < 0 {
				p.ch <- result{err: ErrBadReply}
				break
			}
			for i := 0; i < k && err == nil; i++ {
				var ln string
				if ln, err = readLine(br); err == nil {
					r.lines = append(r.lines, ln)
				}
			}
			if err != nil {
				p.ch <- result{err: errReplyLost}
				break
			}
		}
		p.ch <- result{r: r}
	}
	c.close()
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	for _, p := range q {
		p.ch <- result{err: errReplyLost}
	}
	close(c.done)
	if c.onDead != nil {
		c.onDead(c)
	}
}

// readLine reads one line without its "\n" and an "\r" before it.
func readLine(br *bufio.Reader) (string, error) {
	s, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// close ends the connection; the reader then fails what is pending.
func (c *conn) close() {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.nc.Close()
}

// strayErr is semd's refusal sent before any request ("ERR LIMIT ..."),
// or nil.
func (c *conn) strayErr() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.HasPrefix(c.stray, "ERR ") {
		return parseErr(c.stray)
	}
	return nil
}

func (c *conn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// cancel ends a blocking request (ACQUIRE, WATCH) the caller no longer
// wants: it half-closes the connection, so semd drops the waiter, and
// gives semd up to grace to answer a grant it had made already (its reply
// may be in flight). The reply, if one came, is returned; the connection
// is closed either way.
func (c *conn) cancel(p *pending, grace time.Duration) (reply, bool) {
	if tc, ok := c.nc.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		c.close()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	defer c.close()
	select {
	case res := <-p.ch:
		return res.r, res.err == nil
	case <-t.C:
		return reply{}, false
	}
}
