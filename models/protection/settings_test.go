package protection_test

import (
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/protection"
	"iam/models/store"
)

func TestSettingsStore(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		org := &identity.Organization{Name: "Org"}
		if err := store.NewStore(db).Orgs.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
		settings := store.NewStore(db).Settings

		got, err := settings.Get(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.AccountBlocking != protection.DefaultAdminSettings().AccountBlocking {
			t.Errorf("defaults = %+v", got.AccountBlocking)
		}

		got.AccountBlocking.FailedAttemptsThreshold = 3
		got.AccountBlocking.IsBlockForever = true
		got.AccountBlocking.BlockingDuration = 0
		if err = settings.Put(ctx, org.ID, got); err != nil {
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
		if _, err = db.NewUpdate().Table("admin_settings").
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

		for _, bad := range []identity.AccountBlockingSettings{
			{FailedAttemptsThreshold: 0, FailedAttemptsResetInterval: 10, BlockingDuration: 10},
			{FailedAttemptsThreshold: 3, FailedAttemptsResetInterval: 0, BlockingDuration: 10},
			{FailedAttemptsThreshold: 3, FailedAttemptsResetInterval: 10, BlockingDuration: 0},
		} {
			s := protection.DefaultAdminSettings()
			s.AccountBlocking = bad
			if err := settings.Put(ctx, org.ID, &s); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("Put(%+v) = %v, want EINVALID", bad, err)
			}
		}
	})
}

func TestSettingsStore_OfflineMFARules(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := modeltest.NewDeviceFixture(t, db, 0)
		other := modeltest.NewDeviceFixture(t, db, 0)
		dev, _ := f.Register(t, modeltest.Facts("PC1", "S1"))
		foreign, _ := other.Register(t, modeltest.Facts("PC9", "S9"))
		g := &protection.DeviceGroup{OrgID: f.Org.ID, Name: "G"}
		if err := f.Store.DeviceGroups.Create(ctx, g, nil); err != nil {
			t.Fatal(err)
		}
		configs, err := f.Store.Factors.List(ctx, f.Org.ID)
		if err != nil {
			t.Fatal(err)
		}
		otherConfigs, _ := other.Store.Factors.List(ctx, other.Org.ID)
		good := func(s *protection.AdminSettings) {
			s.OfflineMFA.IsEnabled = true
			s.OfflineMFA.Actions = []string{"InteractiveLogon", "RDP"}
			s.OfflineMFA.DevicesAssignment = protection.DevicesAssignment{DeviceIDs: []protection.RefID{protection.RefID(dev.ID)}, GroupIDs: []protection.RefID{protection.RefID(g.ID)}}
			s.OfflineMFA.SecondaryAuthentication = protection.OfflineMFASecondary{NoOfRequiredFactors: 1, FactorConfigs: []protection.FactorConfigSetting{
				{AuthnFactorConfigID: configs[2].ID, VerificationOrder: 2}, {AuthnFactorConfigID: configs[0].ID, VerificationOrder: 1, IsMandatory: true}}}
			s.OfflineMFA.OfflineVerificationDuration = protection.DurationSetting{Value: 12, Unit: "hours"}
		}
		got, err := f.Store.Settings.Update(ctx, f.Org.ID, func(cur *protection.AdminSettings) (*protection.AdminSettings, error) {
			good(cur)
			return cur, nil
		})
		if err != nil {
			t.Fatalf("good settings: %v", err)
		}
		if !got.OfflineMFA.AssignsDevice(dev.ID, nil) || !got.OfflineMFA.AssignsDevice(42, []int64{g.ID}) || got.OfflineMFA.AssignsDevice(42, []int64{7}) {
			t.Error("AssignsDevice")
		}
		for name, c := range map[string]struct {
			edit  func(*protection.AdminSettings)
			field string
		}{
			"unknown action":  {func(s *protection.AdminSettings) { s.OfflineMFA.Actions = []string{"Telnet"} }, "offline_mfa_settings.actions"},
			"repeated action": {func(s *protection.AdminSettings) { s.OfflineMFA.Actions = []string{"SSH", "SSH"} }, "offline_mfa_settings.actions"},
			"foreign device": {func(s *protection.AdminSettings) {
				s.OfflineMFA.DevicesAssignment.DeviceIDs = []protection.RefID{protection.RefID(foreign.ID)}
			}, "offline_mfa_settings.devices_assignment.device_ids"},
			"not an id":     {func(s *protection.AdminSettings) { s.OfflineMFA.DevicesAssignment.DeviceIDs = []protection.RefID{0} }, "offline_mfa_settings.devices_assignment.device_ids"},
			"unknown group": {func(s *protection.AdminSettings) { s.OfflineMFA.DevicesAssignment.GroupIDs = []protection.RefID{12345} }, "offline_mfa_settings.devices_assignment.group_ids"},
			"foreign factor": {func(s *protection.AdminSettings) {
				s.OfflineMFA.SecondaryAuthentication.FactorConfigs[0].AuthnFactorConfigID = otherConfigs[0].ID
			}, "offline_mfa_settings.secondary_authentication.factor_configs"},
			"order gap": {func(s *protection.AdminSettings) {
				s.OfflineMFA.SecondaryAuthentication.FactorConfigs[0].VerificationOrder = 3
			}, "offline_mfa_settings.secondary_authentication.factor_configs"},
			"too many required": {func(s *protection.AdminSettings) { s.OfflineMFA.SecondaryAuthentication.NoOfRequiredFactors = 3 }, "offline_mfa_settings.secondary_authentication.no_of_required_factors"},
			"below mandatory":   {func(s *protection.AdminSettings) { s.OfflineMFA.SecondaryAuthentication.NoOfRequiredFactors = 0 }, "offline_mfa_settings.secondary_authentication.no_of_required_factors"},
			"bad unit":          {func(s *protection.AdminSettings) { s.OfflineMFA.OfflineVerificationDuration.Unit = "attempts" }, "offline_mfa_settings.offline_verification_duration.unit"},
			"too many days": {func(s *protection.AdminSettings) {
				s.OfflineMFA.OfflineVerificationDuration = protection.DurationSetting{Value: 400, Unit: "days"}
			}, "offline_mfa_settings.offline_verification_duration.value"},
			"enabled no factors": {func(s *protection.AdminSettings) { s.OfflineMFA.SecondaryAuthentication.FactorConfigs = nil }, "offline_mfa_settings.secondary_authentication.factor_configs"},
			"captcha":            {func(s *protection.AdminSettings) { s.CaptchaType = "audio" }, "captcha_type"},
		} {
			_, err := f.Store.Settings.Update(ctx, f.Org.ID, func(cur *protection.AdminSettings) (*protection.AdminSettings, error) {
				c.edit(cur)
				return cur, nil
			})
			var me *models.Error
			if !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != c.field {
				t.Errorf("%s: %v, want EINVALID on %s", name, err, c.field)
			}
		}
		// Nothing of the refused changes was stored.
		again, _ := f.Store.Settings.Get(ctx, f.Org.ID)
		if len(again.OfflineMFA.Actions) != 2 || again.OfflineMFA.OfflineVerificationDuration.Unit != "hours" {
			t.Errorf("stored after refusals: %+v", again.OfflineMFA)
		}
	})
}
