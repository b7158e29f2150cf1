package oauth_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/oauthstore"
	"iam/models/protection"
)

// TestAdminSettings_GovernSignIn: account blocking settings changed through
// PATCH /protection/admin-settings govern the very next sign-ins: the
// account blocks at the new threshold (not the default 5), for the new
// duration.
func TestAdminSettings_GovernSignIn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, false, nil)
		selfA, _ := f.client(f.env.Org, oauthstore.ClientSelf)
		tok := f.issue(f.srv, selfA, f.admin, false, "svc.conditional_access_policy.ALL").AccessToken
		resp := f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok,
			Body: map[string]any{"account_blocking_settings": map[string]any{"failed_attempts_threshold": 2, "blocking_duration": 90}}})
		if resp.Status != http.StatusOK {
			t.Fatalf("patch: %d %s", resp.Status, resp.Body)
		}
		var got struct {
			Data protection.AdminSettings `json:"data"`
		}
		resp.JSON(t, &got)
		if ab := got.Data.AccountBlocking; ab.FailedAttemptsThreshold != 2 || ab.BlockingDuration != 90 || ab.FailedAttemptsResetInterval != 30 {
			t.Fatalf("merged settings %+v", ab)
		}

		client, _ := f.client(f.env.Org, oauthstore.ClientServer, callback)
		authURL := f.authURL(authParams(client, "svc.job.READ"))
		b := f.browser()
		b.signIn(authURL, f.user.Email, "wrong once")
		if u, _ := f.users.Get(context.Background(), f.env.Org.ID, f.user.ID); u.BlockedUntil != nil {
			t.Fatalf("blocked after one failure")
		}
		start := time.Now()
		b.signIn(authURL, f.user.Email, "wrong twice")
		u, err := f.users.Get(context.Background(), f.env.Org.ID, f.user.ID)
		if err != nil || u.BlockedUntil == nil {
			t.Fatalf("not blocked at the new threshold of 2: %+v %v", u, err)
		}
		if d := u.BlockedUntil.Sub(start); d < 89*time.Minute || d > 91*time.Minute {
			t.Errorf("blocked for %v, want the new 90 minutes", d)
		}
		// The right password is refused while blocked.
		if r := b.signIn(authURL, f.user.Email, adminPassword); r.status != http.StatusUnauthorized {
			t.Errorf("right password while blocked: %d", r.status)
		}
		// A threshold below 1 is refused and leaves the settings as they were.
		resp = f.env.Do(apitest.Request{Method: "PATCH", Path: "/api/v1/protection/admin-settings", Token: tok,
			Body: map[string]any{"account_blocking_settings": map[string]any{"failed_attempts_threshold": 0}}})
		if resp.Status != http.StatusBadRequest {
			t.Fatalf("threshold 0: %d %s", resp.Status, resp.Body)
		}
		resp = f.env.Get("/api/v1/protection/admin-settings", tok)
		resp.JSON(t, &got)
		if got.Data.AccountBlocking.FailedAttemptsThreshold != 2 {
			t.Errorf("after a refused patch: %+v", got.Data.AccountBlocking)
		}
	})
}
