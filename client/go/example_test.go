// example_test.go: the README's "From Go" example, tried as a new user
// would: copied into a new module next to the repository with a replace
// directive, built without network access (GOPROXY=off), and two copies
// run at once against one semd. Every job prints when it starts and ends
// while holding its permit; the intervals of both processes together never
// overlap more than the capacity (2).

package semd

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestReadmeExample(t *testing.T) {
	src, err := os.ReadFile("examples/gpu/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if readme, err := os.ReadFile("../../README.md"); err == nil {
		if !bytes.Contains(readme, src) {
			t.Error("README.md does not show examples/gpu/main.go verbatim (section From Go)")
		}
	} else {
		t.Errorf("README.md: %v", err)
	}
	here, _ := os.Getwd()
	dir := t.TempDir()
	mod := "module example.com/gpujobs\n\ngo 1.19\n\nrequire semd.example/semd v0.0.0\n\nreplace semd.example/semd => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", "gpujobs", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the example as a new module: %v\n%s", err, out)
	}
	d := startSemd(t)
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = exec.Command(filepath.Join(dir, "gpujobs"))
		cmds[i].Env = append(os.Environ(), "SEMD_HOSTS="+d.addr())
		cmds[i].Stdout = &outs[i]
		cmds[i].Stderr = &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cmds {
		if err := cmds[i].Wait(); err != nil {
			t.Fatalf("copy %d: %v\n%s", i, err, outs[i].String())
		}
	}
	type ev struct {
		at    int64
		delta int
	}
	var evs []ev
	starts := 0
	for i := range outs {
		sc := bufio.NewScanner(strings.NewReader(outs[i].String()))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || (f[0] != "start" && f[0] != "end") {
				t.Fatalf("copy %d printed %q", i, sc.Text())
			}
			at, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "start" {
				evs = append(evs, ev{at, +1})
				starts++
			} else {
				evs = append(evs, ev{at, -1})
			}
		}
	}
	if starts != 20 {
		t.Fatalf("%d jobs ran, want 20:\n%s\n%s", starts, outs[0].String(), outs[1].String())
	}
	// Ends before starts at the same instant: a release then a grant.
	sort.Slice(evs, func(i, j int) bool {
		return evs[i].at < evs[j].at || evs[i].at == evs[j].at && evs[i].delta < evs[j].delta
	})
	held, peak := 0, 0
	for _, e := range evs {
		held += e.delta
		if held > peak {
			peak = held
		}
	}
	if peak > 2 {
		t.Fatalf("two copies held %d permits at once, capacity 2", peak)
	}
	if peak < 1 {
		t.Fatal("no job ran")
	}
}
