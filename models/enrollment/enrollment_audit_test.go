package enrollment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/modeltest"
)

func findChange(changes []models.FieldChange, field string) (models.FieldChange, bool) {
	for _, c := range changes {
		if c.Field == field {
			return c, true
		}
	}
	return models.FieldChange{}, false
}

// CA configs record ca_config.created, .updated (the fields that changed:
// a new file as its subject, thumbprint and expiry, never its bytes) and
// .deleted, each naming the CA config and its factor config; refused
// changes record nothing.
func TestCAStore_Audit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newEnrollFixture(t, db, 0)
		smart := f.configs[enrollment.FactorSmartCard].ID
		email, display := enrollment.MapEmail, enrollment.MapDisplayName
		now := time.Now()
		first := generateCA(t, "First CA", now.Add(-time.Hour), now.Add(365*24*time.Hour))
		second := generateCA(t, "Second CA", now.Add(-time.Hour), now.Add(2*365*24*time.Hour))
		events := func(typ string) []models.EventRecord { return modeltest.EventsOfType(t, db, f.org.ID, typ) }

		// Refused: not the smart card config, a bad mapping, no file.
		_, err := f.store.CAs.Create(ctx, f.org.ID, f.configs[enrollment.FactorEmailOTP].ID, enrollment.CAInput{File: first.cert.Raw, MappingAttribute: &email})
		modeltest.WantCode(t, err, models.EINVALID)
		bad := "nope"
		_, err = f.store.CAs.Create(ctx, f.org.ID, smart, enrollment.CAInput{File: first.cert.Raw, MappingAttribute: &bad})
		modeltest.WantCode(t, err, models.EINVALID)
		ca, err := f.store.CAs.Create(ctx, f.org.ID, smart, enrollment.CAInput{File: first.cert.Raw, MappingAttribute: &email})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.store.CAs.Create(ctx, f.org.ID, smart, enrollment.CAInput{File: first.cert.Raw, MappingAttribute: &email})
		modeltest.WantCode(t, err, models.ECONFLICT) // the same CA twice
		evs := events(audit.CAConfigCreated)
		if len(evs) != 1 {
			t.Fatalf("%d created events, want 1", len(evs))
		}
		tg := evs[0].Targets
		if len(tg) != 2 || tg[0].Type != enrollment.CAConfigTargetType || tg[0].ID != models.FormatID(ca.ID) ||
			!strings.Contains(tg[0].DisplayName, "First CA") || !strings.Contains(tg[0].DisplayName, ca.Thumbprint) ||
			tg[1].Type != enrollment.FactorConfigTargetType || tg[1].ID != models.FormatID(smart) {
			t.Errorf("created targets %+v", tg)
		}

		// Update: the mapping and the file.
		_, err = f.store.CAs.Update(ctx, f.org.ID, smart, ca.ID+1, enrollment.CAInput{MappingAttribute: &display})
		modeltest.WantCode(t, err, models.ENOTFOUND)
		_, err = f.store.CAs.Update(ctx, f.org.ID, smart, ca.ID, enrollment.CAInput{MappingAttribute: &bad})
		modeltest.WantCode(t, err, models.EINVALID)
		if n := len(events(audit.CAConfigUpdated)); n != 0 {
			t.Fatalf("refused updates recorded %d events", n)
		}
		updated, err := f.store.CAs.Update(ctx, f.org.ID, smart, ca.ID, enrollment.CAInput{MappingAttribute: &display, File: second.cert.Raw})
		if err != nil {
			t.Fatal(err)
		}
		evs = events(audit.CAConfigUpdated)
		if len(evs) != 1 || len(evs[0].Targets) != 2 || evs[0].Targets[0].ID != models.FormatID(ca.ID) {
			t.Fatalf("updated events %+v", evs)
		}
		changes := evs[0].Targets[0].Changes
		want := map[string][2]any{
			"certificate_mapping_attribute": {email, display},
			"subject_name":                  {ca.SubjectName, updated.SubjectName},
			"thumbprint":                    {ca.Thumbprint, updated.Thumbprint},
		}
		for field, w := range want {
			if c, ok := findChange(changes, field); !ok || c.Old != w[0] || c.New != w[1] {
				t.Errorf("change of %s: %+v (found %v), want %v -> %v", field, c, ok, w[0], w[1])
			}
		}
		if _, ok := findChange(changes, "expires_on"); !ok {
			t.Errorf("changes %+v lack expires_on", changes)
		}
		if _, ok := findChange(changes, "is_enabled"); ok {
			t.Errorf("changes %+v name is_enabled, which did not change", changes)
		}
		var bodies []string
		if err = db.NewSelect().Table("audit_events").Column("body").Where("org_id = ?", f.org.ID).Scan(ctx, &bodies); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if strings.Contains(b, "BEGIN CERTIFICATE") || strings.Contains(b, "cert_der") || strings.Contains(b, "ca_file") {
				t.Errorf("an event holds certificate bytes: %s", b)
			}
		}

		// Delete.
		err = f.store.CAs.Delete(ctx, f.org.ID, smart, ca.ID+1)
		modeltest.WantCode(t, err, models.ENOTFOUND)
		err = f.store.CAs.Delete(ctx, modeltest.NewOrg(t, f.store).ID, smart, ca.ID)
		modeltest.WantCode(t, err, models.ENOTFOUND)
		if n := len(events(audit.CAConfigDeleted)); n != 0 {
			t.Fatalf("refused deletes recorded %d events", n)
		}
		if err = f.store.CAs.Delete(ctx, f.org.ID, smart, ca.ID); err != nil {
			t.Fatal(err)
		}
		evs = events(audit.CAConfigDeleted)
		if len(evs) != 1 || len(evs[0].Targets) != 2 || evs[0].Targets[0].ID != models.FormatID(ca.ID) ||
			!strings.Contains(evs[0].Targets[0].DisplayName, "Second CA") || evs[0].Targets[1].ID != models.FormatID(smart) {
			t.Fatalf("deleted events %+v", evs)
		}
		if _, err = f.store.CAs.Get(ctx, f.org.ID, smart, ca.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("deleted CA config: %v", err)
		}
	})
}

// The logon script's update records the fields that changed; a refused one
// records nothing.
func TestLogonScriptStore_Audit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newEnrollFixture(t, db, 0)
		_, err := f.store.LogonScript.Update(ctx, f.org.ID, func(c *enrollment.LogonScriptConfig) error {
			c.ForceEnrollment = "maybe"
			return nil
		})
		modeltest.WantCode(t, err, models.EINVALID)
		if evs := modeltest.EventsOfType(t, db, f.org.ID, audit.LogonScriptUpdated); len(evs) != 0 {
			t.Fatalf("refused update recorded %+v", evs)
		}
		def := enrollment.DefaultLogonScriptConfig(f.org.ID)
		if _, err = f.store.LogonScript.Update(ctx, f.org.ID, func(c *enrollment.LogonScriptConfig) error {
			c.WindowTitle, c.ForceEnrollment = "Enroll now, please", "true"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		evs := modeltest.EventsOfType(t, db, f.org.ID, audit.LogonScriptUpdated)
		if len(evs) != 1 || len(evs[0].Targets) != 1 || evs[0].Targets[0].Type != enrollment.LogonScriptTargetType ||
			evs[0].Targets[0].ID != models.FormatID(f.org.ID) {
			t.Fatalf("events %+v", evs)
		}
		changes := evs[0].Targets[0].Changes
		if len(changes) != 2 {
			t.Errorf("changes %+v, want force_enrollment and window_title", changes)
		}
		for field, w := range map[string][2]any{"window_title": {def.WindowTitle, "Enroll now, please"}, "force_enrollment": {"false", "true"}} {
			if c, ok := findChange(changes, field); !ok || c.Old != w[0] || c.New != w[1] {
				t.Errorf("change of %s: %+v (found %v), want %v -> %v", field, c, ok, w[0], w[1])
			}
		}
	})
}

// Enrollment data written by a job's chunks records no audit event: the
// rows' outcomes are the job's results.
func TestEnrollmentStore_ApplyChunkRecordsNoEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newEnrollFixture(t, db, 2)
		job := f.newJob(t)
		before := len(modeltest.Events(t, db, f.org.ID))
		f.apply(t, job, false, jobs.JobProgress{Total: 2}, f.row(1, 1, "a@example.com"), f.row(2, 2, "b@example.com"))
		if got := f.enrollments(t, 1); len(got) != 2 {
			t.Fatalf("enrollments %+v", got)
		}
		if after := modeltest.Events(t, db, f.org.ID); len(after) != before {
			t.Errorf("a chunk recorded %+v", after[before:])
		}
	})
}
