//go:build record

package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/workflows"
)

func recordHooks(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true, EventHookPoll: 20 * time.Millisecond,
		EventHookAllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	env.Store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})
	ctx := context.Background()
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Add(1) }))
	defer srv.Close()

	// A hook's delivery workflow: one event delivered, then the hook is
	// disabled and the workflow ends.
	h := &hooks.Hook{OrgID: env.Org.ID, URL: srv.URL, EventTypes: []string{"user.*"}, Enabled: true}
	if _, err := env.Store.Hooks.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	id := workflows.EventHookWorkflowID(h.ID)
	run, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: env.Jobs.TaskQueue},
		workflows.EventHookWorkflowName, workflows.EventHookInput{HookID: h.ID, OrgID: h.OrgID})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Users.Create(ctx, &identity.User{OrgID: env.Org.ID, Email: "hooked@example.com", Status: identity.UserActive}, ""); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); got.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no delivery")
		}
	}
	off := false
	if _, err := env.Store.Hooks.Update(ctx, env.Org.ID, h.ID, hooks.HookChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, env.Temporal, id, filepath.Join("testdata", hookHistories[0]))

	// The supervisor: starts the workflow of the enabled hook (ended at
	// once by disabling it).
	h2 := &hooks.Hook{OrgID: env.Org.ID, URL: srv.URL, EventTypes: []string{"group.*"}, Enabled: true}
	if _, err := env.Store.Hooks.Create(ctx, h2); err != nil {
		t.Fatal(err)
	}
	sid := "record-" + hookHistories[1]
	srun, err := env.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sid, TaskQueue: env.Jobs.TaskQueue},
		workflows.EventHooksSuperviseWorkflowName)
	if err != nil {
		t.Fatal(err)
	}
	if err := srun.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, env.Temporal, sid, filepath.Join("testdata", hookHistories[1]))
	if _, err := env.Store.Hooks.Update(ctx, env.Org.ID, h2.ID, hooks.HookChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if err := env.Temporal.GetWorkflow(ctx, workflows.EventHookWorkflowID(h2.ID), "").Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
