package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"iam/api/auth"
	"iam/client"
)

// The generated code is what oapi-codegen makes of api/openapi.yaml today:
// a change to the document without `go generate ./client` fails here.
func TestGenerated_UpToDate(t *testing.T) {
	dir := t.TempDir()
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "client.gen.go")
	cfg = bytes.Replace(cfg, []byte("output: client.gen.go"), []byte("output: "+out), 1)
	if err = os.WriteFile(filepath.Join(dir, "cfg.yaml"), cfg, 0o600); err != nil { //nolint:gosec // a file in the test's temporary directory
		t.Fatal(err)
	}
	// The command of the go:generate line in doc.go, writing to dir.
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, line := range strings.Split(string(doc), "\n") {
		if rest, ok := strings.CutPrefix(line, "//go:generate "); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) < 3 || args[0] != "go" {
		t.Fatalf("doc.go has no go:generate line running go: %q", args)
	}
	for i, a := range args {
		switch a {
		case "oapi-codegen.yaml":
			args[i] = filepath.Join(dir, "cfg.yaml")
		case "../api/openapi.yaml":
			args[i] = filepath.Join("..", "api", "openapi.yaml")
		}
	}
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the go:generate line of the package's own doc.go
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if msg, runErr := cmd.CombinedOutput(); runErr != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), runErr, msg)
	}
	want, err := os.ReadFile(out) //nolint:gosec // the file generated into the test's temporary directory
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("client/client.gen.go is out of date with api/openapi.yaml: run go generate ./client")
	}
}

func TestAuthScheme_IsTheAPIs(t *testing.T) {
	if client.AuthScheme != auth.Scheme {
		t.Errorf("client.AuthScheme %q, auth.Scheme %q", client.AuthScheme, auth.Scheme)
	}
}
