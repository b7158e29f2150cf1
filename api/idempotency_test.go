package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/sqldb"
)

func countJobs(t *testing.T, db *bun.DB, orgID int64) int64 {
	t.Helper()
	n, err := db.NewSelect().Table("jobs").Where("org_id = ?", orgID).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func withKey(key string, h http.Header) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Set(api.IdempotencyKeyHeader, key)
	return h
}

// TestIdempotency_UploadAnsweredOnce: an upload sent again with its
// Idempotency-Key (as a new multipart body: another boundary) gets the first
// answer and makes no second job; the key with another file is refused 422;
// the same key of another client, or no key, is a request of its own; a key
// out of bounds is refused 400.
func TestIdempotency_UploadAnsweredOnce(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		seedUsers(t, db, env.Org, 3)
		ids := factorIDs(t, env, env.Org)
		scopes := []string{"svc.quick_enrollment.CREATE", "svc.job.READ"}
		tok := env.Tokens.Mint(auth.Principal{UserID: sqldb.NewID(), OrgID: env.Org.ID, ClientID: "client-a", Scopes: scopes})
		fields := [][2]string{{"factor_configs", ids[enrollment.FactorSMSOTP]}}
		csv := "Primary Email,Mobile Number\nuser1@example.com,+14155550001\n"
		const path = "/api/v1/protection/quick-enrollment/upload-csv"
		send := func(tok, key, csv string) *apitest.Response {
			body, ct := form(t, fields, "users.csv", []byte(csv)) // a new boundary each time
			h := http.Header{"Content-Type": {ct}}
			if key != "" {
				h = withKey(key, h)
			}
			return env.Do(apitest.Request{Method: http.MethodPost, Path: path, Token: tok, Body: body, Header: h})
		}

		first := send(tok, "upload-1", csv)
		if first.Status != http.StatusAccepted || first.Header.Get(api.IdempotentReplayedHeader) != "" {
			t.Fatalf("first upload: %d %s", first.Status, first.Body)
		}
		again := send(tok, "upload-1", csv)
		if again.Status != http.StatusAccepted || string(again.Body) != string(first.Body) ||
			again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get(api.IdempotentReplayedHeader) != "true" {
			t.Fatalf("retry: %d %s (Location %q, replayed %q); want the first answer %s (Location %q)", again.Status, again.Body,
				again.Header.Get("Location"), again.Header.Get(api.IdempotentReplayedHeader), first.Body, first.Header.Get("Location"))
		}
		if n := countJobs(t, db, env.Org.ID); n != 1 {
			t.Fatalf("%d jobs after a retry, want 1", n)
		}

		other := send(tok, "upload-1", csv+"user2@example.com,+14155550002\n")
		if e := other.ErrorBody(t); other.Status != http.StatusUnprocessableEntity || e.Code != api.CodeIdempotencyKeyReused {
			t.Errorf("the key with another file: %d %s, want 422 %s", other.Status, other.Body, api.CodeIdempotencyKeyReused)
		}
		tokB := env.Tokens.Mint(auth.Principal{UserID: sqldb.NewID(), OrgID: env.Org.ID, ClientID: "client-b", Scopes: scopes})
		if r := send(tokB, "upload-1", csv); r.Status != http.StatusAccepted || r.Header.Get(api.IdempotentReplayedHeader) != "" {
			t.Errorf("another client's key: %d %s, want a new 202", r.Status, r.Body)
		}
		if r := send(tok, "", csv); r.Status != http.StatusAccepted {
			t.Errorf("no key: %d %s", r.Status, r.Body)
		}
		if n := countJobs(t, db, env.Org.ID); n != 3 {
			t.Errorf("%d jobs, want 3 (first, other client, no key)", n)
		}
		for _, bad := range []string{strings.Repeat("k", 256), "has space", "ключ"} {
			r := send(tok, bad, csv)
			if e := r.ErrorBody(t); r.Status != http.StatusBadRequest || e.Code != api.CodeInvalidParameter {
				t.Errorf("key %.20q: %d %s, want 400", bad, r.Status, r.Body)
			}
		}
		// A refused answer (400) is an answer too: replayed, no job.
		bad := send(tok, "bad-file", "Nonsense Column\nx\n")
		if bad.Status != http.StatusBadRequest {
			t.Fatalf("bad file: %d %s", bad.Status, bad.Body)
		}
		if r := send(tok, "bad-file", "Nonsense Column\nx\n"); r.Status != http.StatusBadRequest || string(r.Body) != string(bad.Body) ||
			r.Header.Get(api.IdempotentReplayedHeader) != "true" {
			t.Errorf("bad file again: %d %s, want the first 400 replayed", r.Status, r.Body)
		}
		if n := countJobs(t, db, env.Org.ID); n != 3 {
			t.Errorf("%d jobs, want 3", n)
		}
	})
}

// TestIdempotency_InstanceDiesAfterItsJob: instance A writes the job of a
// request and stops before answering (held in the hook: a process killed
// there leaves the same database); the client retries against instance B,
// which shares the database. While A's lease runs B answers 409 in
// progress; once it has run out, 409 "interrupted" naming the job; never a
// second job. When A answers after all, its answer becomes the key's.
func TestIdempotency_InstanceDiesAfterItsJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		const lease = 1500 * time.Millisecond
		a := apitest.New(t, db, apitest.Options{IdempotencyLease: lease})
		b := apitest.New(t, db, apitest.Options{IdempotencyLease: lease})
		org := a.Org
		scopes := []string{"svc.group.CREATE"}
		tokA := a.Tokens.Mint(auth.Principal{UserID: sqldb.NewID(), OrgID: org.ID, ClientID: "cli", Scopes: scopes})
		tokB := b.Tokens.Mint(auth.Principal{UserID: sqldb.NewID(), OrgID: org.ID, ClientID: "cli", Scopes: scopes})
		body := map[string]any{"name": "Sales", "is_dynamic": true, "membership_rule": `department eq "Sales"`}
		const key = "group-sales-1"

		// The first request to reach its answer is held there; any other
		// passes (a second one would be a duplicate: counted below).
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		t.Cleanup(api.SetIdempotencyAfterAnswerHook(func(c *gin.Context) {
			if c.GetHeader(api.IdempotencyKeyHeader) != key {
				return
			}
			first := false
			once.Do(func() { first = true; close(held) })
			if first {
				<-release
			}
		}))
		firstDone := make(chan *apitest.Response, 1)
		go func() {
			firstDone <- a.Do(apitest.Request{Method: http.MethodPost, Path: "/api/v1/groups", Token: tokA, Body: body, Header: withKey(key, nil)})
		}()
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("the first request did not reach its answer")
		}
		if n := countJobs(t, db, org.ID); n != 1 {
			t.Fatalf("%d jobs after the first request's commit, want 1", n)
		}

		r := b.Do(apitest.Request{Method: http.MethodPost, Path: "/api/v1/groups", Token: tokB, Body: body, Header: withKey(key, nil)})
		if r.Status != http.StatusConflict || r.Header.Get("Retry-After") == "" || !strings.Contains(r.ErrorBody(t).Title, "In Progress") {
			t.Errorf("retry while the first is in flight: %d %s (Retry-After %q), want 409 in progress", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		time.Sleep(lease + 200*time.Millisecond)
		var jobID int64
		if err := db.NewSelect().Table("jobs").Column("id").Where("org_id = ?", org.ID).Scan(context.Background(), &jobID); err != nil {
			t.Fatal(err)
		}
		r = b.Do(apitest.Request{Method: http.MethodPost, Path: "/api/v1/groups", Token: tokB, Body: body, Header: withKey(key, nil)})
		if r.Status != http.StatusConflict || r.Header.Get("Location") != "/api/v1/jobs/"+models.FormatID(jobID) || !strings.Contains(r.ErrorBody(t).Title, "Interrupted") {
			t.Errorf("retry after the first died: %d %s (Location %q), want 409 interrupted naming job %d", r.Status, r.Body, r.Header.Get("Location"), jobID)
		}
		if n := countJobs(t, db, org.ID); n != 1 {
			t.Fatalf("%d jobs after the retries, want 1", n)
		}
		groups, err := db.NewSelect().Table("groups").Where("org_id = ?", org.ID).Count(context.Background())
		if err != nil || groups != 1 {
			t.Errorf("%d groups, %v; want 1", groups, err)
		}

		close(release)
		first := <-firstDone
		if first.Status != http.StatusCreated {
			t.Fatalf("first request: %d %s", first.Status, first.Body)
		}
		r = b.Do(apitest.Request{Method: http.MethodPost, Path: "/api/v1/groups", Token: tokB, Body: body, Header: withKey(key, nil)})
		if r.Status != http.StatusCreated || string(r.Body) != string(first.Body) || r.Header.Get(api.IdempotentReplayedHeader) != "true" {
			t.Errorf("retry after the first answered: %d %s, want its answer %s", r.Status, r.Body, first.Body)
		}
	})
}
