package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/secret"
	"iam/models/sqldb"
)

// TestAuditCommand_VerifyNamesEachTampering: `iam audit seal` then `iam
// audit verify` on dev's SQLite file: an untouched log verifies; after an
// event is altered, one removed, one inserted and a digest replaced, verify
// fails naming each; an export verifies with the public key alone, the
// database gone.
func TestAuditCommand_VerifyNamesEachTampering(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := secret.NewKey()
	seed, err := secret.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	env := []string{"IAM_AUDIT_SIGNING_KEY=" + key}
	var out string
	iam := func(args ...string) (string, error) {
		var out bytes.Buffer
		runErr := run(ctx, append(args, "--data-dir", dir), env, &out, &out)
		return out.String(), runErr
	}
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "iam.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = sqldb.MigrateUp(ctx, db); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		err = sqldb.InTx(ctx, db, func(ctx context.Context, tx bun.Tx) error {
			return models.Record(ctx, models.AuditEvent{OrgID: 1, Type: "user.created",
				Targets: []models.EventTarget{{Type: "user", ID: fmt.Sprint(i), DisplayName: "u"}}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err = db.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err = iam("audit", "seal"); err != nil || !strings.Contains(out, "organization 1: 6 event(s) sealed") {
		t.Fatalf("seal: %v\n%s", err, out)
	}
	if out, err = iam("audit", "verify"); err != nil || !strings.Contains(out, "verified") {
		t.Fatalf("verify of an untouched log: %v\n%s", err, out)
	}
	export := filepath.Join(t.TempDir(), "export.ndjson")
	if out, err = iam("audit", "export", "--org", "1", "--out", export); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}

	db, err = sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "iam.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE audit_events SET body = replace(body, '"display_name":"u"', '"display_name":"x"') WHERE seq = 2`,
		`DELETE FROM audit_events WHERE seq = 4`,
		`INSERT INTO audit_events (org_id, seq, id, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id, body, hash)
			SELECT org_id, 7, id + 1, published, event_type, actor_type, actor_id, result, request_id, target_type, target_id, replace(body, '"sequence":6', '"sequence":7'), hash FROM audit_events WHERE seq = 6`,
		`UPDATE audit_digests SET events_hash = '00' || substr(events_hash, 3) WHERE number = 1`,
	} {
		if _, err = db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err = db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = iam("audit", "verify")
	if err == nil {
		t.Fatalf("verify of a tampered log passed:\n%s", out)
	}
	for _, want := range []string{"event 2 (id", "event 4: removed", "event 7 (id", "inserted", "digest 1: altered"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify does not say %q:\n%s", want, out)
		}
	}

	// The export, made before the tampering, verifies without the database.
	if err = os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if out, err = iam("audit", "verify", "--file", export, "--public-key", pub); err != nil || !strings.Contains(out, "6 event(s) sealed") {
		t.Fatalf("verify --file: %v\n%s", err, out)
	}
	// A byte changed in the export is found.
	b, err := os.ReadFile(export) //nolint:gosec // the export this test wrote into its temporary folder
	if err != nil {
		t.Fatal(err)
	}
	if err = os.WriteFile(export, bytes.Replace(b, []byte(`"display_name":"u"`), []byte(`"display_name":"v"`), 1), 0o600); err != nil { //nolint:gosec // the export this test wrote into its temporary folder
		t.Fatal(err)
	}
	if out, err = iam("audit", "verify", "--file", export, "--public-key", pub); err == nil || !strings.Contains(out, "digest 1: its events 1 to 6 do not match") {
		t.Fatalf("verify --file of an altered export: %v\n%s", err, out)
	}
}
