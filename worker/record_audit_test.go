//go:build record

package worker_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/workflows"
)

func recordAudit(t *testing.T) {
	signer, err := audit.NewSigner(bytes.Repeat([]byte{5}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true, AuditSigner: signer, AuditRetention: time.Hour})
	ctx := context.Background()
	other := env.NewOrg("Other organization")
	for _, org := range []int64{env.Org.ID, other.ID} {
		if err := env.Store.Users.Create(ctx, &identity.User{OrgID: org, Email: "audited@example.com", Status: identity.UserActive}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, wf := range []string{workflows.AuditSealWorkflowName, workflows.AuditRetentionWorkflowName} {
		id := "record-" + auditHistories[i]
		run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: env.Jobs.TaskQueue}, wf)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		writeHistory(t, env.Temporal, id, filepath.Join("testdata", auditHistories[i]))
	}
}
