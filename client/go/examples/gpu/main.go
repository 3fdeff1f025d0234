// Ten jobs, at most two at a time across every process on every host.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"semd.example/semd"
)

func main() {
	ctx := context.Background()
	client, err := semd.Dial(ctx) // SEMD_HOSTS, else 127.0.0.1:7313
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sem, err := semd.NewWeighted(client, "gpu", 2) // was semaphore.NewWeighted(2)
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for job := 1; job <= 10; job++ {
		wg.Add(1)
		go func(job int) {
			defer wg.Done()
			if err := sem.Acquire(ctx, 1); err != nil {
				log.Print(err)
				return
			}
			defer sem.Release(1)
			fmt.Printf("start %d %d job %d\n", time.Now().UnixNano(), os.Getpid(), job)
			time.Sleep(50 * time.Millisecond) // the work
			fmt.Printf("end %d %d job %d\n", time.Now().UnixNano(), os.Getpid(), job)
		}(job)
	}
	wg.Wait()
}
