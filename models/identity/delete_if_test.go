package identity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	modelstore "iam/models/store"
)

// TestUserStore_DeleteIf: the user check sees is the one deleted: it is
// locked from the check to the commit, so a write that arrives in between
// waits and then finds no user; a check's error deletes nothing.
func TestUserStore_DeleteIf(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := modelstore.NewStore(db)
		org := modeltest.NewOrg(t, store)
		u := modeltest.AddUser(t, store.Users, org.ID, identity.User{Email: "dora@example.com"})

		refused := errors.New("stale version")
		if err := store.Users.DeleteIf(ctx, org.ID, u.ID, func(*identity.User) error { return refused }); !errors.Is(err, refused) {
			t.Fatalf("a refusing check: %v", err)
		}
		if _, err := store.Users.Get(ctx, org.ID, u.ID); err != nil {
			t.Fatalf("the user is gone after a refused check: %v", err)
		}

		done := make(chan error, 1)
		started := false
		err := store.Users.DeleteIf(ctx, org.ID, u.ID, func(seen *identity.User) error {
			if seen.ID != u.ID || seen.Email != "dora@example.com" {
				t.Errorf("check saw %+v", seen)
			}
			if !started {
				started = true
				go func() {
					_, err := store.Users.Update(ctx, org.ID, u.ID, func(u *identity.User) error {
						u.Title = "late"
						return nil
					}, nil)
					done <- err
				}()
				select {
				case err := <-done:
					t.Errorf("an update ran while the check held the user: %v", err)
				case <-time.After(300 * time.Millisecond):
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("the update that waited: %v, want not found", err)
		}
		if err := store.Users.DeleteIf(ctx, org.ID, u.ID, func(*identity.User) error { return nil }); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("deleting again: %v, want not found", err)
		}
	})
}
