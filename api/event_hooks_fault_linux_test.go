package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"iam/models"
	"iam/models/hooks"
	"iam/models/sqldb"
	"iam/workflows"
)

// TestEventHooks_WorkerKilledDuringDelivery: 1,000 events to a hook whose
// worker is SIGKILLed while it delivers them; a second worker takes over.
// Every event arrives, and an idempotent receiver (it accepts a webhook-id
// once) accepts each once; what is sent twice is only what the killed
// worker had in flight or was recording (a few), never a delivery recorded
// before.
func TestEventHooks_WorkerKilledDuringDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("long fault test")
	}
	const events = 1000
	f := newFaultEnv(t, "hooks-fault")
	f.Store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})
	ctx := context.Background()

	var mu sync.Mutex
	accepted := map[string]bool{}
	requests := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // so that requests are in flight when the worker dies
		mu.Lock()
		defer mu.Unlock()
		requests++
		accepted[r.Header.Get("webhook-id")] = true // idempotent: a second time changes nothing
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted), requests
	}

	h := &hooks.Hook{OrgID: f.Org.ID, URL: rcv.URL, EventTypes: []string{"user.*"}, Enabled: true}
	if _, err := f.Store.Hooks.Create(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.EventHookWorkflowID(h.ID), TaskQueue: f.Jobs.TaskQueue},
		workflows.EventHookWorkflowName, workflows.EventHookInput{HookID: h.ID, OrgID: h.OrgID}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < events; i += 50 {
		err := sqldb.InTx(ctx, f.DB, func(ctx context.Context, _ bun.Tx) error {
			for j := i; j < i+50; j++ {
				if err := models.Record(ctx, models.AuditEvent{OrgID: f.Org.ID, Type: "user.updated",
					Targets: []models.EventTarget{{Type: "user", ID: fmt.Sprint(1000 + j), DisplayName: "u"}}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	allow := "IAM_EVENT_HOOKS_ALLOW_PRIVATE=127.0.0.0/8"
	w1 := f.startWorker(t, allow)
	began := time.Now()
	// 350: mid-batch (a run takes 256 due deliveries at a time).
	waitFor(t, time.Minute, "deliveries under way", func() bool { n, _ := count(); return n >= 350 })
	if err := w1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w1.Wait()
	atKill, _ := count()
	t.Logf("worker killed after %d deliveries (%s)", atKill, time.Since(began).Round(time.Millisecond))
	if atKill >= events {
		t.Fatal("every delivery was made before the kill: nothing tested")
	}
	f.startWorker(t, allow)
	waitFor(t, 2*time.Minute, "every delivery", func() bool { n, _ := count(); return n == events })
	time.Sleep(500 * time.Millisecond) // anything resent late would show now
	n, reqs := count()
	t.Logf("%d events accepted once each, %d requests (%d sent twice: in flight or being recorded at the kill)", n, reqs, reqs-n)
	if n != events {
		t.Fatalf("%d of %d events arrived", n, events)
	}
	// Only the in-flight request and the attempts being recorded are sent again.
	if reqs-n > 32 {
		t.Fatalf("%d requests sent twice", reqs-n)
	}
	var pending int
	var dl deliveryList
	for from := 0; ; from += 1000 {
		dl.Data = nil
		f.Env.Get(fmt.Sprintf("/api/v1/event-hooks/%d/deliveries?limit=1000&from=%d", h.ID, from), f.Env.Token(f.Org, "svc.event_hook.READ")).JSON(t, &dl)
		for _, d := range dl.Data {
			if d.Status != hooks.StatusSucceeded {
				pending++
			}
		}
		if len(dl.Data) < 1000 {
			break
		}
	}
	if pending != 0 {
		t.Fatalf("%d deliveries not recorded as succeeded", pending)
	}
	off := false
	if _, err := f.Store.Hooks.Update(ctx, f.Org.ID, h.ID, hooks.HookChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
}
