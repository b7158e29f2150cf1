package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// brokenWriter fails every write, as a closed standard output does.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestBootstrapOrg_UnprintedPasswordFails: the first admin's generated
// password is shown once, on the output; when that write fails, the start
// fails instead of leaving an admin whose password nobody saw.
func TestBootstrapOrg_UnprintedPasswordFails(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := loadConfig([]string{"IAM_DATA_DIR=" + filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	store, _, err := openAdminStore(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, store)
	_, err = bootstrapOrg(ctx, store, cfg.OAuth, brokenWriter{}, log)
	if err == nil || !strings.Contains(err.Error(), "print the first admin's password") {
		t.Errorf("bootstrap with an output that fails: %v, want the failed print", err)
	}
}
