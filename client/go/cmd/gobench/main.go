// gobench: the Go client's load generator for make bench, the shape of
// tests/bench/semload's default run: W goroutines (50) sharing one
// Client, each looping Acquire(ctx, 1) then Release(1) on a Weighted of
// limit L (10); each waiting Acquire runs on a connection of its own, so
// W goroutines use W connections. After a warm-up it counts the pairs
// done in the measured seconds and prints one JSON line as semload does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"semd.example/semd"
)

func main() {
	addr := flag.String("a", "127.0.0.1:7313", "semd address")
	workers := flag.Int("c", 50, "goroutines (each on a connection of its own while it waits)")
	limit := flag.Int64("l", 10, "capacity")
	name := flag.String("s", "gobench", "semaphore name")
	warmup := flag.Float64("w", 1, "seconds of load before counting")
	duration := flag.Float64("d", 5, "seconds counted")
	flag.Parse()

	ctx := context.Background()
	c, err := semd.Dial(ctx, *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
	defer c.Close()
	w, err := semd.NewWeighted(c, *name, *limit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
	var pairs int64
	var stop int32
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.LoadInt32(&stop) == 0 {
				if err := w.Acquire(ctx, 1); err != nil {
					errs <- err
					return
				}
				w.Release(1)
				atomic.AddInt64(&pairs, 1)
			}
		}()
	}
	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	start, t0 := atomic.LoadInt64(&pairs), time.Now()
	time.Sleep(time.Duration(*duration * float64(time.Second)))
	end, el := atomic.LoadInt64(&pairs), time.Since(t0)
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "gobench:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]interface{}{
		"target": "semd-go", "conns": *workers, "limit": *limit,
		"pairs": end - start, "seconds": el.Seconds(),
		"pairs_per_s": float64(end-start) / el.Seconds(),
	})
	fmt.Println(string(out))
}
