package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavyDevPackages are the module paths only `iam dev` needs: the embedded
// Temporal server and its Web UI.
var heavyDevPackages = []string{"go.temporal.io/server", "github.com/temporalio/ui-server"}

// goListDeps lists the packages ./cmd/iam links with the build tags given.
func goListDeps(t *testing.T, tags string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, "./cmd/iam") //nolint:gosec // the go tool, with the build tags of the test
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %q ./cmd/iam: %v", tags, err)
	}
	return strings.Fields(string(out))
}

// TestProductionBuild_LinksNoTemporalServer: the production build (-tags
// nodev, deploy/Dockerfile) links no package of the Temporal server or its
// UI, which the default build (`go run ./cmd/iam dev`) does.
func TestProductionBuild_LinksNoTemporalServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module twice")
	}
	count := func(deps []string) (n int, first string) {
		for _, d := range deps {
			for _, heavy := range heavyDevPackages {
				if d == heavy || strings.HasPrefix(d, heavy+"/") {
					if n == 0 {
						first = d
					}
					n++
				}
			}
		}
		return n, first
	}
	if n, first := count(goListDeps(t, "nodev")); n != 0 {
		t.Errorf("the production build links %d packages of the Temporal server or UI (%s, ...)", n, first)
	}
	if n, _ := count(goListDeps(t, "")); n == 0 {
		t.Errorf("the default build links no Temporal server: iam dev cannot run")
	}
}

// TestProductionBuild_DevSaysHow: `iam dev` of the production binary fails
// cleanly and says how to get the one-process shape.
func TestProductionBuild_DevSaysHow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out, err := exec.Command(e2eProdBinary(t), "dev").CombinedOutput() //nolint:gosec // the binary this test built
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(string(out), "go run ./cmd/iam dev") {
		t.Errorf("iam dev of the production binary: %v: %s; want exit 1 naming `go run ./cmd/iam dev`", err, out)
	}
}
