package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeersBenchmarkBuilds: the peer benchmark (bench/peers, a module of its
// own so that River never becomes a dependency of this one) builds and vets
// against this tree. It works from the module cache only (GOPROXY=off): CI
// downloads the benchmark's modules first (.ci/run); elsewhere, without
// them, the test says how to get them and stops.
func TestPeersBenchmarkBuilds(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "bench", "peers"))
	if err != nil {
		t.Fatal(err)
	}
	gocmd := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	run := func(args ...string) (string, error) {
		cmd := exec.Command(gocmd, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("build", "-o", filepath.Join(t.TempDir(), "peers"), "."); err != nil {
		if strings.Contains(out, "module lookup disabled") {
			t.Skipf("the peer benchmark's modules are not in the module cache; run `go mod download` in %s (.ci/run does): %s", dir, out)
		}
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	if out, err := run("vet", "./..."); err != nil {
		t.Fatalf("go vet in %s: %v\n%s", dir, err, out)
	}
}
