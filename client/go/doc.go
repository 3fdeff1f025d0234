// Package semd is the Go client of semd, the semaphore coordinator
// daemon: semaphores with capacities and weights, held by one daemon (or
// an owner and its standbys) for every process on every host.
//
// Weighted is a drop-in for golang.org/x/sync/semaphore.Weighted: change
// the constructor and keep the calls.
//
//	client, err := semd.Dial(ctx)                  // SEMD_HOSTS, else 127.0.0.1:7313
//	sem, err := semd.NewWeighted(client, "gpu", 8) // was semaphore.NewWeighted(8)
//	if err := sem.Acquire(ctx, 2); err != nil { ... }
//	defer sem.Release(2)
//
// The semantics are x/sync's (FIFO; a big request at the head is never
// starved; a cancelled ctx removes its waiter; TryAcquire fails while
// anyone waits; Release of more than held panics), kept by semd's engine.
// The one difference: semd releases whole grants, so Release(n) frees
// grants whose sizes add up to n and panics on a release that would split
// one.
//
// Permits acquired with Acquire and TryAcquire are bound to a connection:
// if the process dies, semd releases them. AcquireLease takes a lease
// instead, which outlives the process; its Permit has a fencing token and
// a Lost channel fed by semd's WATCH. Client.AcquireAll takes several
// semaphores as one lease, all or none, without deadlock between callers
// that name them in different orders:
//
//	p, err := client.AcquireAll(ctx,
//		[]semd.Part{{Name: "gpu", N: 1}, {Name: "db", N: 2}},
//		semd.AcquireOptions{Lease: 10 * time.Minute})
//
// Every leased acquire carries a request id (AcquireOptions.ID, else a
// drawn one), so a lease whose reply was lost is asked again on a new
// connection and answered with its token, instead of being leaked.
//
// The client follows libsemc(3): a list of addresses with the owner found
// among them (ERR STANDBY owner=..., lost connections, capped backoff),
// AUTH and NAME on every connection, bound permits re-ATTACHed after a
// reconnect (those semd will not give back go to Options.OnLost), and a
// request whose reply was lost never sent again (ErrNoReply, or ErrLost
// for a bound acquire) but for a leased acquire, sent again with its id.
// The README's section "From Go" says more.
package semd
