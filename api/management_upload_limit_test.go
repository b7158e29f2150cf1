package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/uptrace/bun"

	"iam/api"
	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/identity"
)

// A process resolves at most MgmtUploadConcurrency management uploads at
// once: past it an upload is answered 429 with Retry-After and nothing is
// kept; once a slot is free again the same upload is resolved.
func TestManagement_UploadConcurrencyLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{MgmtUploadConcurrency: 1})
		tok := env.Token(env.Org, "svc.management.all")
		u := &identity.User{OrgID: env.Org.ID, Email: "u@example.com", Status: 1}
		if err := env.Store.Users.Create(t.Context(), u, ""); err != nil {
			t.Fatal(err)
		}
		body, h := csvUpload(t, []byte("Primary Email\nu@example.com\n"), "", false)
		upload := func() *apitest.Response {
			return env.Do(apitest.Request{Method: "POST", Path: mgmtBase + "delete-users/uploads", Token: tok, Body: body, Header: h})
		}

		// The first upload holds the one slot until released.
		entered, release := make(chan struct{}), make(chan struct{})
		undo := api.SetMgmtUploadHook(func() {
			close(entered)
			<-release
		})
		first := make(chan *apitest.Response)
		go func() { first <- upload() }()
		<-entered
		undo()

		resp := upload()
		wantError(t, resp, http.StatusTooManyRequests, "00000112", "uploads")
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
		}

		close(release)
		if resp := <-first; resp.Status != http.StatusCreated {
			t.Fatalf("the first upload: %d %s", resp.Status, resp.Body)
		}
		if resp := upload(); resp.Status != http.StatusCreated {
			t.Errorf("an upload once the slot is free: %d %s", resp.Status, resp.Body)
		}
		var n int
		if err := db.NewSelect().Table("mgmt_uploads").ColumnExpr("count(*)").Where("org_id = ?", env.Org.ID).Scan(t.Context(), &n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("%d uploads stored, want 2 (the refused one keeps nothing)", n)
		}
	})
}
