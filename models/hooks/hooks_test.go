package hooks_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/secret"
	"iam/models/store"
)

func newStore(t *testing.T, db *bun.DB) (*store.Store, *identity.Organization) {
	t.Helper()
	box, err := secret.NewBox(bytes.Repeat([]byte{7}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewStore(db).SealBlobs(box)
	return st, modeltest.NewOrg(t, st)
}

func TestHookStore_CRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st, org := newStore(t, db)
		hs := st.Hooks

		// http is refused unless the policy allows it; unknown types too.
		if _, err := hs.Create(ctx, &hooks.Hook{OrgID: org.ID, URL: "http://example.com/h", EventTypes: []string{"user.*"}}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("http url: %v", err)
		}
		if _, err := hs.Create(ctx, &hooks.Hook{OrgID: org.ID, URL: "https://example.com/h", EventTypes: []string{"nope.*"}}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("unknown family: %v", err)
		}
		h := &hooks.Hook{OrgID: org.ID, URL: "https://example.com/h", Description: "d", EventTypes: []string{"user.*", "job.queued", "user.*"}, Enabled: true}
		sec, err := hs.Create(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, hooks.SecretPrefix))
		if !strings.HasPrefix(sec, hooks.SecretPrefix) || err != nil || len(raw) != 32 {
			t.Fatalf("secret %q: %v", sec, err)
		}
		if len(h.EventTypes) != 2 {
			t.Fatalf("types %v", h.EventTypes)
		}
		if bytes.Contains(h.SecretSealed, raw) {
			t.Fatal("secret stored in the clear")
		}
		ev := modeltest.OneEvent(t, db, org.ID, audit.EventHookCreated)
		if strings.Contains(mustJSON(t, ev), base64.StdEncoding.EncodeToString(raw)) {
			t.Fatal("secret in the event")
		}
		got, err := hs.Get(ctx, org.ID, h.ID)
		if err != nil || got.URL != h.URL {
			t.Fatalf("get %+v %v", got, err)
		}
		keys, err := hs.SigningKeys(got, time.Now())
		if err != nil || len(keys) != 1 || !bytes.Equal(keys[0], raw) {
			t.Fatalf("keys %v %v", keys, err)
		}

		// Another organization sees nothing.
		_, other := newStore(t, db)
		if _, err = hs.Get(ctx, other.ID, h.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org: %v", err)
		}
		if _, err = hs.Update(ctx, other.ID, h.ID, hooks.HookChange{}); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("other org update: %v", err)
		}
		list, _, err := hs.List(ctx, other.ID, listing.Params{})
		if err != nil || len(list) != 0 {
			t.Fatalf("other org list %v %v", list, err)
		}
		list, _, err = hs.List(ctx, org.ID, listing.Params{})
		if err != nil || len(list) != 1 {
			t.Fatalf("list %v %v", list, err)
		}

		off := false
		desc := "new"
		up, err := hs.Update(ctx, org.ID, h.ID, hooks.HookChange{Enabled: &off, Description: &desc})
		if err != nil || up.Enabled || up.Description != "new" {
			t.Fatalf("update %+v %v", up, err)
		}
		ch := modeltest.ChangesOf(t, modeltest.OneEvent(t, db, org.ID, audit.EventHookUpdated).Targets[0])
		if ch["enabled"] == "" || ch["description"] == "" {
			t.Fatalf("changes %v", ch)
		}

		sec2, err := hs.RotateSecret(ctx, org.ID, h.ID)
		if err != nil || sec2 == sec {
			t.Fatalf("rotate %v", err)
		}
		got, _ = hs.Get(ctx, org.ID, h.ID)
		if keys, err = hs.SigningKeys(got, time.Now()); err != nil || len(keys) != 2 || !bytes.Equal(keys[1], raw) {
			t.Fatalf("keys after rotation %d %v", len(keys), err)
		}
		if keys, _ = hs.SigningKeys(got, time.Now().Add(25*time.Hour)); len(keys) != 1 {
			t.Fatalf("old key signs past its overlap")
		}
		rot := modeltest.OneEvent(t, db, org.ID, audit.EventHookSecretRotated)
		if s := mustJSON(t, rot); strings.Contains(s, strings.TrimPrefix(sec2, hooks.SecretPrefix)) {
			t.Fatal("secret in the rotation event")
		}

		if err = hs.Delete(ctx, org.ID, h.ID); err != nil {
			t.Fatal(err)
		}
		modeltest.OneEvent(t, db, org.ID, audit.EventHookDeleted)
		if _, err = hs.Get(ctx, org.ID, h.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("deleted: %v", err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHookStore_Dispatch: committed events after the hook's creation that
// it names become one delivery each, in sequence order; rolled-back
// changes, earlier events and other types none; attempts follow the
// schedule and a hook failing long enough is disabled with its event.
func TestHookStore_Dispatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		st, org := newStore(t, db)
		hs := st.Hooks
		modeltest.AddUser(t, st.Users, org.ID, identity.User{Email: "before@example.com"})
		h := &hooks.Hook{OrgID: org.ID, URL: "https://example.com/h", EventTypes: []string{"user.*"}, Enabled: true}
		if _, err := hs.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		for _, e := range []string{"a@example.com", "b@example.com", "c@example.com"} {
			modeltest.AddUser(t, st.Users, org.ID, identity.User{Email: e})
		}
		// A duplicate email rolls back: no event, no delivery.
		if err := st.Users.Create(ctx, &identity.User{OrgID: org.ID, Email: "a@example.com", Status: identity.UserActive}, ""); err == nil {
			t.Fatal("duplicate user created")
		}
		modeltest.NewJob(t, st, org) // job.queued: not named
		n, err := hs.Dispatch(ctx, h, 2)
		if err != nil || n != 2 {
			t.Fatalf("dispatch %d %v", n, err)
		}
		if n, err = hs.Dispatch(ctx, h, 100); err != nil || n == 0 {
			t.Fatalf("dispatch rest %d %v", n, err)
		}
		if n, err = hs.Dispatch(ctx, h, 100); err != nil || n != 0 {
			t.Fatalf("dispatch again %d %v", n, err)
		}
		due, err := hs.Due(ctx, h.ID, time.Now().Add(time.Second), 100)
		if err != nil || len(due) != 3 {
			t.Fatalf("due %d %v", len(due), err)
		}
		for i, d := range due {
			var p struct {
				Type string `json:"type"`
				Data struct {
					Targets []models.EventTarget `json:"targets"`
				} `json:"data"`
			}
			if err = json.Unmarshal([]byte(d.Payload), &p); err != nil {
				t.Fatal(err)
			}
			if p.Type != audit.UserCreated || i > 0 && d.EventSeq <= due[i-1].EventSeq {
				t.Fatalf("delivery %d: %+v", i, p)
			}
			if p.Data.Targets[0].DisplayName == "before@example.com" {
				t.Fatal("an event before the hook was delivered")
			}
		}

		// Attempts: success, failure retried after the schedule's wait,
		// failure for good once it is spent.
		pol := hooks.Policy{Schedule: []time.Duration{time.Minute}, DisableAfter: time.Hour}
		now := time.Now().UTC()
		res, err := hs.Record(ctx, h, []hooks.Outcome{
			{DeliveryID: due[0].ID, OK: true, Attempt: hooks.Attempt{Time: now, StatusCode: 200}},
			{DeliveryID: due[1].ID, Attempt: hooks.Attempt{Time: now, StatusCode: 500}},
			{DeliveryID: due[2].ID, Attempt: hooks.Attempt{Time: now, Error: "connection refused"}},
		}, pol)
		if err != nil || res.Succeeded != 1 || res.Retrying != 2 {
			t.Fatalf("record %+v %v", res, err)
		}
		if due, _ = hs.Due(ctx, h.ID, now.Add(30*time.Second), 100); len(due) != 0 {
			t.Fatalf("due before the wait: %d", len(due))
		}
		if due, _ = hs.Due(ctx, h.ID, now.Add(61*time.Second), 100); len(due) != 2 {
			t.Fatalf("due after the wait: %d", len(due))
		}
		res, err = hs.Record(ctx, h, []hooks.Outcome{{DeliveryID: due[0].ID, Attempt: hooks.Attempt{Time: now, StatusCode: 500}}}, pol)
		if err != nil || res.Failed != 1 {
			t.Fatalf("record %+v %v", res, err)
		}
		d, err := hs.GetDelivery(ctx, org.ID, h.ID, due[0].ID)
		if err != nil || d.Status != hooks.StatusFailed || d.AttemptCount != 2 || len(d.Attempts) != 2 {
			t.Fatalf("failed delivery %+v %v", d, err)
		}
		// A retry by hand makes it due now with the schedule ahead again.
		if _, err = hs.RetryDelivery(ctx, org.ID, h.ID, d.ID); err != nil {
			t.Fatal(err)
		}
		modeltest.OneEvent(t, db, org.ID, audit.EventHookDeliveryRetried)
		if _, err = hs.RetryDelivery(ctx, org.ID, h.ID, 42); models.ErrorCode(err) != models.ENOTFOUND {
			t.Fatalf("retry of an unknown delivery: %v", err)
		}
		list, _, err := hs.ListDeliveries(ctx, org.ID, h.ID, listing.Params{})
		if err != nil || len(list) != 3 {
			t.Fatalf("list %d %v", len(list), err)
		}
		// Pruning takes finished deliveries only (one succeeded; the
		// retried one is pending again).
		if n, perr := hs.PruneDeliveries(ctx, h.ID, time.Now().Add(time.Hour), 100); perr != nil || n != 1 {
			t.Fatalf("pruned %d %v", n, perr)
		}
		if list, _, _ = hs.ListDeliveries(ctx, org.ID, h.ID, listing.Params{}); len(list) != 2 {
			t.Fatalf("%d deliveries after pruning", len(list))
		}

		// Failing since over DisableAfter: disabled with its event.
		long := hooks.Policy{Schedule: pol.Schedule, DisableAfter: time.Nanosecond}
		due, _ = hs.Due(ctx, h.ID, time.Now().Add(time.Hour), 100)
		res, err = hs.Record(ctx, h, []hooks.Outcome{{DeliveryID: due[0].ID, Attempt: hooks.Attempt{Time: time.Now(), StatusCode: 503}}}, long)
		if err != nil || !res.Disabled || h.Enabled {
			t.Fatalf("not disabled: %+v %v", res, err)
		}
		dis := modeltest.OneEvent(t, db, org.ID, audit.EventHookDisabled)
		if dis.Actor.Type != models.ActorSystem {
			t.Fatalf("disabled by %+v", dis.Actor)
		}
		if n, _ = hs.Dispatch(ctx, h, 100); n != 0 {
			t.Fatal("a disabled hook dispatched")
		}
		// Re-enabled by PATCH: failure record cleared.
		on := true
		if h, err = hs.Update(ctx, org.ID, h.ID, hooks.HookChange{Enabled: &on}); err != nil || h.FailingSince != nil || h.DisabledReason != "" {
			t.Fatalf("re-enable %+v %v", h, err)
		}

		td, err := hs.Test(ctx, org.ID, h.ID)
		if err != nil || td.EventType != hooks.TestEventType {
			t.Fatalf("test %+v %v", td, err)
		}
		modeltest.OneEvent(t, db, org.ID, audit.EventHookTestRequested)
	})
}
