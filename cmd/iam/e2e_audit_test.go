package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/secret"
)

// The sizes of the audit crash test: requests in all, clients sending them
// at once, answers before the kill, users made beforehand for the PATCHes
// and one request in e2eAuditPatchEvery a PATCH.
const (
	e2eAuditRequests   = 1000
	e2eAuditClients    = 32
	e2eAuditKillAfter  = 300
	e2eAuditPatched    = 50
	e2eAuditPatchEvery = 5
)

// e2eAuditCall is one request of the storm and what became of it.
type e2eAuditCall struct {
	patch    bool
	email    string // of a create
	userID   int64  // of a PATCH: the user; of a create answered 201: the new user
	lastName string // of a PATCH: the value it sets
	status   int    // 0: no answer
	err      error
}

// TestProduction_AuditEventsSurviveKill9 (non-short: about 15–25 s):
// `iam serve` of the production build on PostgreSQL takes 1,000 concurrent
// user writes from 32 clients (creates with distinct emails, and one in
// five a PATCH of the lastName of one of 50 users made beforehand, each
// with its own value) and is SIGKILLed once 300 have been answered, with
// dozens in flight. Started again, it serves; then, in one snapshot of the
// database: every user that exists has exactly one user.created event
// naming it, no user.created event names a user that does not exist, every
// create answered 201 made its user, and every PATCH answered 2xx has the
// user.updated event with its value (and no user.updated event carries a
// value nobody sent). Last, `iam audit seal` then `iam audit verify` pass:
// the events are numbered without a gap and none was altered.
func TestProduction_AuditEventsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 concurrent writes across a SIGKILL of iam serve")
	}
	t.Parallel()
	began := time.Now()
	dsn := dbtest.PostgresURL(t)
	e2eEmptySchema(t, dsn)
	dbEnv := []string{"IAM_DATABASE_URL=" + dsn}
	if code, _, errOut := e2eRun(t, "migrate-up", dbEnv, "migrate", "up"); code != 0 {
		t.Fatalf("iam migrate up exited %d: %s", code, errOut)
	}
	temporalAddr, namespace := e2eTemporal(t)
	shape := e2eStartShape(t, dsn, temporalAddr, namespace)
	db := e2eOpenDB(t, dsn)
	org := e2eFirstOrg(t, db.Store)
	token := e2eIssueToken(t, []string{"IAM_DATABASE_URL=" + dsn, "IAM_SECRET_KEY=" + e2eSecretKey}, "svc.user.ALL", "--user", e2eAdminEmail)

	// The users the PATCHes change, made through the API.
	var patched []int64
	for i := range e2eAuditPatched {
		var created struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		e2eAPIJSON(t, shape.apiAddr, "POST", "/api/v1/users", token, map[string]any{
			"firstName": "Patched", "lastName": "start", "email": fmt.Sprintf("patched%d@audit.example.com", i),
		}, http.StatusCreated, &created)
		id, err := models.ParseID("id", created.Data.ID)
		if err != nil {
			t.Fatal(err)
		}
		patched = append(patched, id)
	}

	calls := make([]e2eAuditCall, e2eAuditRequests)
	for i := range calls {
		c := &calls[i]
		if i%e2eAuditPatchEvery == 0 {
			c.patch, c.userID, c.lastName = true, patched[(i/e2eAuditPatchEvery)%len(patched)], fmt.Sprintf("patch-%d", i)
		} else {
			c.email = fmt.Sprintf("storm%d@audit.example.com", i)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: e2eAuditClients}}
	defer client.CloseIdleConnections()
	addr := shape.apiAddr
	send := func(c *e2eAuditCall) {
		method, path, v := "POST", "/api/v1/users", map[string]any{"firstName": "Storm", "email": c.email}
		if c.patch {
			method, path, v = "PATCH", "/api/v1/users/"+models.FormatID(c.userID), map[string]any{"lastName": c.lastName}
		}
		body, err := json.Marshal(v)
		if err != nil {
			c.err = err
			return
		}
		req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
		if err != nil {
			c.err = err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", auth.Scheme+" "+token)
		resp, err := client.Do(req)
		if err != nil {
			c.err = err
			return
		}
		defer func() { _ = resp.Body.Close() }() // read to its end below: a failed close loses nothing
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			c.err = err // the answer was cut by the kill: not an answer
			return
		}
		c.status = resp.StatusCode
		apitest.CheckResponse(t, req, resp, data) // t.Errorf only: the document was loaded by the requests above
		if !c.patch && c.status == http.StatusCreated {
			var created struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if err := json.Unmarshal(data, &created); err == nil {
				c.userID, _ = models.ParseID("id", created.Data.ID)
			}
		}
		if c.status >= 300 {
			c.err = fmt.Errorf("%s %s answered %d: %.300s", method, path, c.status, data)
		}
	}

	// The storm: the kill comes from this goroutine once e2eAuditKillAfter
	// requests have been answered, while the clients keep sending.
	var answered atomic.Int64
	killNow := make(chan struct{})
	next := make(chan int)
	var wg sync.WaitGroup
	stormBegan := time.Now()
	for range e2eAuditClients {
		wg.Go(func() {
			for i := range next {
				send(&calls[i])
				if calls[i].status != 0 && answered.Add(1) == e2eAuditKillAfter {
					close(killNow)
				}
			}
		})
	}
	go func() {
		defer close(next)
		for i := range calls {
			next <- i
		}
	}()
	select {
	case <-killNow:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%d of %d requests answered after 2 minutes", answered.Load(), e2eAuditKillAfter)
	}
	shape.serve.kill()
	killedAt := answered.Load()
	t.Logf("iam serve SIGKILLed after %d answers, %v into the storm", killedAt, time.Since(stormBegan).Round(time.Millisecond))
	wg.Wait()

	var ok, refused, failed, cut int
	for i := range calls {
		c := &calls[i]
		switch {
		case c.status >= 200 && c.status < 300:
			ok++
		case c.status != 0:
			failed++
			t.Errorf("request %d: %v", i, c.err)
		case errors.Is(c.err, syscall.ECONNREFUSED):
			refused++
		default:
			cut++
		}
	}
	t.Logf("%d answered 2xx, %d answered otherwise, %d cut by the kill (sent, never answered), %d refused (sent after it)", ok, failed, cut, refused)
	if ok < e2eAuditKillAfter-e2eAuditClients {
		t.Fatalf("only %d requests answered 2xx before the kill", ok)
	}

	// Started again on the same database, it serves, and its events follow
	// the ones before the kill.
	shape = e2eStartShape(t, dsn, temporalAddr, namespace)
	e2eAPIJSON(t, shape.apiAddr, "POST", "/api/v1/users", token, map[string]any{"firstName": "After", "email": "after@audit.example.com"}, http.StatusCreated, nil)
	e2eAPIJSON(t, shape.apiAddr, "PATCH", "/api/v1/users/"+models.FormatID(patched[0]), token, map[string]any{"lastName": "after"}, http.StatusOK, nil)

	// No one reads the log: the API numbers the events itself, within about
	// a second, 1 to N without a gap.
	e2eWaitAuditNumbered(t, db.DB, org.ID)

	// One snapshot of the users and their events: every transaction wrote
	// both or neither, so any snapshot must hold them alike (a session of
	// the dead process that PostgreSQL has not ended yet changes nothing).
	var users []int64
	var events []struct {
		Type     string `bun:"event_type"`
		TargetID string `bun:"target_id"`
		Body     string `bun:"body"`
	}
	err := db.DB.RunInTx(t.Context(), &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Table("users").Column("id").Where("org_id = ?", org.ID).Scan(ctx, &users); err != nil {
			return err
		}
		return tx.NewSelect().Table("audit_events").Column("event_type", "target_id", "body").
			Where("org_id = ? AND event_type IN (?)", org.ID, bun.List([]string{audit.UserCreated, audit.UserUpdated})).OrderExpr("seq").Scan(ctx, &events)
	})
	if err != nil {
		t.Fatal(err)
	}
	created := map[int64]int{}
	updated := map[string]int{} // "<user id> <lastName>"
	for _, ev := range events {
		id, err := strconv.ParseInt(ev.TargetID, 10, 64)
		if err != nil {
			t.Fatalf("%s event names user %q", ev.Type, ev.TargetID)
		}
		if ev.Type == audit.UserCreated {
			created[id]++
			continue
		}
		var rec models.EventRecord
		if err := json.Unmarshal([]byte(ev.Body), &rec); err != nil || len(rec.Targets) != 1 {
			t.Fatalf("user.updated event %.300s: %v", ev.Body, err)
		}
		for _, ch := range rec.Targets[0].Changes {
			if ch.Field == "lastName" {
				updated[fmt.Sprint(id, " ", ch.New)]++
			}
		}
	}
	exists := map[int64]bool{}
	for _, id := range users {
		exists[id] = true
		if created[id] != 1 {
			t.Errorf("user %d exists with %d user.created events, want 1", id, created[id])
		}
	}
	for id, n := range created {
		if !exists[id] {
			t.Errorf("%d user.created event(s) name user %d, which does not exist", n, id)
		}
	}
	sent := map[string]bool{fmt.Sprint(patched[0], " after"): true}
	patchesUnanswered := 0
	committedUnanswered := len(users) - 1 - e2eAuditPatched - 1 // the admin, the PATCHed users, the one made after
	for i := range calls {
		c := &calls[i]
		if c.patch {
			key := fmt.Sprint(c.userID, " ", c.lastName)
			sent[key] = true
			if c.status/100 == 2 && updated[key] != 1 {
				t.Errorf("PATCH %d (user %d, lastName %q) was answered %d and has %d user.updated events, want 1", i, c.userID, c.lastName, c.status, updated[key])
			}
			if c.status == 0 && updated[key] > 0 {
				patchesUnanswered++
			}
			continue
		}
		if c.status == http.StatusCreated {
			committedUnanswered--
			if !exists[c.userID] {
				t.Errorf("create %d (%s) was answered 201 with user %d, which does not exist", i, c.email, c.userID)
			}
		}
	}
	for key, n := range updated {
		if !sent[key] || n != 1 {
			t.Errorf("%d user.updated event(s) set user and lastName %q, which one PATCH sent: %v", n, key, sent[key])
		}
	}
	t.Logf("%d users, %d user.created and %d user.updated events; %d creates and %d PATCHes committed without their answer",
		len(users), len(created), len(events)-len(created), committedUnanswered, patchesUnanswered)

	// Sealed, the log verifies: numbered without a gap, nothing altered.
	auditEnv := append(append([]string{}, dbEnv...), "IAM_AUDIT_SIGNING_KEY="+secret.NewKey())
	code, out, errOut := e2eRun(t, "audit-seal", auditEnv, "audit", "seal", "--org", models.FormatID(org.ID))
	if code != 0 || !bytes.Contains([]byte(out), []byte("event(s) sealed")) {
		t.Fatalf("iam audit seal exited %d:\n%s%s", code, out, errOut)
	}
	t.Logf("iam audit seal: %s", bytes.TrimSpace([]byte(out)))
	code, out, errOut = e2eRun(t, "audit-verify", auditEnv, "audit", "verify", "--org", models.FormatID(org.ID))
	if code != 0 || !bytes.Contains([]byte(out), []byte(": verified")) {
		t.Fatalf("iam audit verify exited %d:\n%s%s", code, out, errOut)
	}
	t.Logf("iam audit verify: %s (the test took %v)", bytes.TrimSpace([]byte(out)), time.Since(began).Round(time.Millisecond))
}

// e2eWaitAuditNumbered waits until the organization's audit events all
// have their numbers, 1 to N without a gap, and their hashes.
func e2eWaitAuditNumbered(t *testing.T, db *bun.DB, orgID int64) {
	t.Helper()
	var last struct {
		Events, Numbered, Hashed, Max int64
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := db.NewRaw(`SELECT count(*) AS events, count(seq) AS numbered, count(hash) AS hashed, COALESCE(max(seq), 0) AS max
			FROM audit_events WHERE org_id = ?`, orgID).Scan(t.Context(), &last)
		if err != nil {
			t.Fatal(err)
		}
		if last.Events > 0 && last.Numbered == last.Events && last.Hashed == last.Events && last.Max == last.Events {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit events not numbered 15 s after the writes, with no reader: %+v", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
