package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPeersBenchmarkBuilds: the peer benchmark (bench/peers, a module of its
// own so that River never becomes a dependency of this one) builds and vets
// against this tree. It fetches the benchmark's modules itself (go mod
// download, from the module proxy as go test fetches this module's own;
// nothing when they are in the module cache already), then builds and vets
// from the module cache only (GOPROXY=off), so no other step is needed.
func TestPeersBenchmarkBuilds(t *testing.T) {
	t.Parallel() // go build and go vet in processes of their own
	dir, err := filepath.Abs(filepath.Join("..", "..", "bench", "peers"))
	if err != nil {
		t.Fatal(err)
	}
	gocmd := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(gocmd, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off"), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(nil, "mod", "download"); err != nil {
		t.Fatalf("go mod download in %s (the peer benchmark's modules, from $GOPROXY): %v\n%s", dir, err, out)
	}
	offline := []string{"GOPROXY=off"}
	if out, err := run(offline, "build", "-o", filepath.Join(t.TempDir(), "peers"), "."); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	if out, err := run(offline, "vet", "./..."); err != nil {
		t.Fatalf("go vet in %s: %v\n%s", dir, err, out)
	}
}
