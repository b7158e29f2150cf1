package models_test

import (
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
)

func TestSettingsStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		org := &models.Organization{Name: "Org"}
		if err := models.NewStore(db).Orgs.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
		settings := models.NewStore(db).Settings

		got, err := settings.Get(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.AccountBlocking != models.DefaultAdminSettings().AccountBlocking {
			t.Errorf("defaults = %+v", got.AccountBlocking)
		}

		got.AccountBlocking.FailedAttemptsThreshold = 3
		got.AccountBlocking.IsBlockForever = true
		got.AccountBlocking.BlockingDuration = 0
		if err := settings.Put(ctx, org.ID, got); err != nil {
			t.Fatalf("Put: %v", err)
		}
		again, err := settings.Get(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.AccountBlocking != got.AccountBlocking || again.OfflineMFA.OfflineVerificationDuration.Unit != "days" {
			t.Errorf("stored %+v, read back %+v", got.AccountBlocking, again.AccountBlocking)
		}

		// A document stored with fewer fields keeps the defaults of the rest.
		if _, err := db.NewUpdate().Table("admin_settings").
			Set("settings = ?", `{"account_blocking_settings":{"failed_attempts_threshold":7}}`).
			Set("updated_at = ?", time.Now().UTC()).
			Where("org_id = ?", org.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		partial, err := settings.Get(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if partial.AccountBlocking.FailedAttemptsThreshold != 7 || partial.CaptchaType != "recaptcha" {
			t.Errorf("partial document read as %+v", partial)
		}

		for _, bad := range []models.AccountBlockingSettings{
			{FailedAttemptsThreshold: 0, FailedAttemptsResetInterval: 10, BlockingDuration: 10},
			{FailedAttemptsThreshold: 3, FailedAttemptsResetInterval: 0, BlockingDuration: 10},
			{FailedAttemptsThreshold: 3, FailedAttemptsResetInterval: 10, BlockingDuration: 0},
		} {
			s := models.DefaultAdminSettings()
			s.AccountBlocking = bad
			if err := settings.Put(ctx, org.ID, &s); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("Put(%+v) = %v, want EINVALID", bad, err)
			}
		}
	})
}
