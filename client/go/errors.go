// errors.go: the errors a call can return. Each protocol ERR code is one
// *Error whose Code compares equal to one of the Err* sentinels with
// errors.Is; the ways a call itself can fail (no connection, a reply that
// never came) have sentinels of their own, as libsemc(3) has one enum
// value for each.

package semd

import (
	"errors"
	"strings"
)

// Code is a protocol ERR code ("NOSEM", "RANGE", ...), PROTOCOL.md's table.
type Code string

// The protocol's ERR codes (versions 1 and 1.1).
const (
	CodeProto       Code = "PROTO"
	CodeTooLong     Code = "TOOLONG"
	CodeAuth        Code = "AUTH"
	CodeNoSem       Code = "NOSEM"
	CodeExists      Code = "EXISTS"
	CodeRange       Code = "RANGE"
	CodeNotHeld     Code = "NOTHELD"
	CodeNotOwner    Code = "NOTOWNER"
	CodeNotLease    Code = "NOTLEASE"
	CodeBusy        Code = "BUSY"
	CodeLimit       Code = "LIMIT"
	CodeUnavailable Code = "UNAVAILABLE"
	CodeStandby     Code = "STANDBY"
	CodeNoConn      Code = "NOCONN"
)

// Error is semd's refusal of a request: "ERR <Code> <Text>". semd changed
// nothing. errors.Is(err, ErrNotHeld) and the like test the code.
type Error struct {
	Code Code
	Text string // semd's human-readable text
}

func (e *Error) Error() string {
	return "semd: " + string(e.Code) + ": " + e.Text
}

// Is lets errors.Is(err, ErrNoSem) match any *Error with that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Text == "" && t.Code == e.Code
}

// Sentinels for errors.Is, one per ERR code.
var (
	ErrProto       = &Error{Code: CodeProto}
	ErrTooLong     = &Error{Code: CodeTooLong}
	ErrAuth        = &Error{Code: CodeAuth}
	ErrNoSem       = &Error{Code: CodeNoSem}
	ErrExists      = &Error{Code: CodeExists}
	ErrRange       = &Error{Code: CodeRange}
	ErrNotHeld     = &Error{Code: CodeNotHeld}
	ErrNotOwner    = &Error{Code: CodeNotOwner}
	ErrNotLease    = &Error{Code: CodeNotLease}
	ErrBusy        = &Error{Code: CodeBusy}
	ErrLimit       = &Error{Code: CodeLimit}
	ErrUnavailable = &Error{Code: CodeUnavailable}
	ErrStandby     = &Error{Code: CodeStandby}
	ErrNoConn      = &Error{Code: CodeNoConn}
)

// The ways a call fails that are not semd's answer.
var (
	// ErrConnect: no owner could be reached; nothing was sent, so nothing
	// happened and trying again is safe.
	ErrConnect = errors.New("semd: cannot connect to an owner")
	// ErrNoReply: the request was sent and its reply was lost (the
	// connection failed). Its outcome is unknown; it is never sent again.
	ErrNoReply = errors.New("semd: the reply was lost; the outcome is unknown")
	// ErrLost: an acquire's reply was lost: a permit may have been granted
	// and lost. Never "not granted".
	ErrLost = errors.New("semd: the reply to an acquire was lost; a permit may have been granted and lost")
	// ErrTimeout: an acquire was not granted within its wait (TIMEOUT).
	ErrTimeout = errors.New("semd: not granted in time")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("semd: client closed")
	// ErrBadReply: semd answered something this client cannot read.
	ErrBadReply = errors.New("semd: malformed reply")
)

// parseErr makes an *Error of an "ERR CODE text" line.
func parseErr(line string) *Error {
	rest := strings.TrimPrefix(line, "ERR")
	rest = strings.TrimLeft(rest, " \t")
	code, text, _ := strings.Cut(rest, " ")
	return &Error{Code: Code(code), Text: strings.TrimSpace(text)}
}
