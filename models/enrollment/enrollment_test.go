package enrollment_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/modeltest"
	"iam/models/store"
)

// enrollFixture is an organization with users, its factor configs and a
// running job.
type enrollFixture struct {
	store   *store.Store
	enroll  *enrollment.EnrollmentStore
	org     *identity.Organization
	users   []*identity.User // users[i] is user i (0 unused)
	configs map[enrollment.FactorType]enrollment.FactorConfig
	names   map[int64]string
}

func newEnrollFixture(t *testing.T, db *bun.DB, n int) *enrollFixture {
	t.Helper()
	ctx := context.Background()
	f := &enrollFixture{store: store.NewStore(db), enroll: store.NewStore(db).Enrollments, users: make([]*identity.User, n+1),
		configs: map[enrollment.FactorType]enrollment.FactorConfig{}, names: map[int64]string{}}
	f.org = modeltest.NewOrg(t, f.store)
	for i := 1; i <= n; i++ {
		u := &identity.User{OrgID: f.org.ID, Email: fmt.Sprintf("User%d@Example.com", i), EmployeeID: fmt.Sprintf("E%d", i),
			MobileNumber: fmt.Sprintf("+1415555%04d", i), Status: identity.UserActive}
		if err := f.store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		f.users[i] = u
	}
	configs, err := store.NewStore(db).Factors.List(ctx, f.org.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range configs {
		f.configs[c.Type] = c
		f.names[c.ID] = c.DisplayName
	}
	return f
}

func (f *enrollFixture) newJob(t *testing.T) *jobs.Job {
	t.Helper()
	job := &jobs.Job{OrgID: f.org.ID, Kind: "QuickEnrollmentCSV", Module: enrollment.EnrollmentModule, ActionName: enrollment.EnrollCSVAction}
	if err := f.store.Jobs.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Jobs.Start(context.Background(), f.org.ID, job.ID); err != nil {
		t.Fatal(err)
	}
	return job
}

// row is a good row of user u with Email OTP and SMS OTP data.
func (f *enrollFixture) row(n int64, u int, email string) enrollment.ChunkRow {
	return enrollment.ChunkRow{Row: n, UserID: f.users[u].ID, Enrollments: []enrollment.Enrollment{
		{FactorConfigID: f.configs[enrollment.FactorEmailOTP].ID, FactorType: enrollment.FactorEmailOTP, Value: email},
		{FactorConfigID: f.configs[enrollment.FactorSMSOTP].ID, FactorType: enrollment.FactorSMSOTP, Value: fmt.Sprintf("+1650555%04d", n)},
	}}
}

func (f *enrollFixture) apply(t *testing.T, job *jobs.Job, overwrite bool, before jobs.JobProgress, rows ...enrollment.ChunkRow) jobs.JobProgress {
	t.Helper()
	next := rows[len(rows)-1].Row + 1
	p, err := f.enroll.ApplyChunk(context.Background(), &enrollment.EnrollChunk{OrgID: f.org.ID, JobID: job.ID, Overwrite: overwrite,
		Rows: rows, Before: before, NextRow: next, NextOffset: 100 * next, Names: f.names})
	if err != nil {
		t.Fatalf("ApplyChunk: %v", err)
	}
	return p
}

func (f *enrollFixture) results(t *testing.T, job *jobs.Job) map[int64]jobs.JobResult {
	t.Helper()
	rs, err := f.store.Jobs.Results(context.Background(), job.ID, "", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]jobs.JobResult{}
	for _, r := range rs {
		out[r.Seq] = r
	}
	return out
}

func (f *enrollFixture) enrollments(t *testing.T, u int) map[enrollment.FactorType]enrollment.Enrollment {
	t.Helper()
	es, err := f.enroll.List(context.Background(), f.org.ID, f.users[u].ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[enrollment.FactorType]enrollment.Enrollment{}
	for _, e := range es {
		out[e.FactorType] = e
	}
	return out
}

func TestEnrollmentStore_MatchUsers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newEnrollFixture(t, db, 3)
		twin := &identity.User{OrgID: f.org.ID, Email: "twin@example.com", MobileNumber: f.users[2].MobileNumber, Status: identity.UserActive}
		if err := f.store.Users.Create(ctx, twin, ""); err != nil {
			t.Fatal(err)
		}
		other := newEnrollFixture(t, db, 1) // another organization's user1@example.com
		key := enrollment.KeyPrimaryEmail
		got, err := f.enroll.MatchUsers(ctx, f.org.ID, key, []string{key.NormalizeKey(" USER1@example.COM "), "user3@example.com", "nobody@example.com", ""})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["user1@example.com"] != f.users[1].ID || got["user3@example.com"] != f.users[3].ID {
			t.Errorf("by email: %v", got)
		}
		if got["user1@example.com"] == other.users[1].ID {
			t.Error("matched another organization's user")
		}
		got, err = f.enroll.MatchUsers(ctx, f.org.ID, enrollment.KeyEmployeeID, []string{"E2", "e3", "E9"})
		if err != nil || len(got) != 1 || got["E2"] != f.users[2].ID {
			t.Errorf("by employee id: %v, %v", got, err)
		}
		// A number two users share matches the older one.
		got, err = f.enroll.MatchUsers(ctx, f.org.ID, enrollment.KeyMobileNumber, []string{f.users[2].MobileNumber})
		if err != nil || len(got) != 1 || got[f.users[2].MobileNumber] != min(f.users[2].ID, twin.ID) {
			t.Errorf("by mobile number: %v, %v", got, err)
		}
		if got, err := f.enroll.MatchUsers(ctx, f.org.ID, key, nil); err != nil || len(got) != 0 {
			t.Errorf("no values: %v, %v", got, err)
		}
	})
}

// A chunk writes its rows' data and results in one go; applied again (a
// retried activity) it leaves the same state and results; rows naming a
// user again fail whichever chunk they are in; without overwrite another
// job's data is kept, with it replaced.
func TestEnrollmentStore_ApplyChunk(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newEnrollFixture(t, db, 6)
		job := f.newJob(t)
		totp, card := f.configs[enrollment.FactorTOTP], f.configs[enrollment.FactorSmartCard]
		notAfter := time.Date(2031, 5, 4, 3, 2, 1, 0, time.UTC)
		withSecret := f.row(3, 3, "otp3@example.com")
		withSecret.Enrollments = append(withSecret.Enrollments,
			enrollment.Enrollment{FactorConfigID: totp.ID, FactorType: enrollment.FactorTOTP, Secret: []byte("sealed")},
			enrollment.Enrollment{FactorConfigID: card.ID, FactorType: enrollment.FactorSmartCard, Value: "CN=User 3", Thumbprint: "ab12", ExpiresAt: &notAfter})
		first := []enrollment.ChunkRow{
			f.row(1, 1, "otp1@example.com"),
			{Row: 2, UserID: f.users[2].ID, Error: "Mobile Number is not a phone number"},
			withSecret,
			f.row(4, 1, "again@example.com"), // user 1 again, same chunk
			{Row: 5, Error: "no user of the organization has Primary Email \"x@example.com\""},
		}
		start := jobs.JobProgress{Total: 8}
		var p jobs.JobProgress
		var rs map[int64]jobs.JobResult
		for attempt := 0; attempt < 2; attempt++ {
			p = f.apply(t, job, false, start, first...)
			want := jobs.JobProgress{Processed: 5, Total: 8, Success: 2, Failed: 3}
			if p != want {
				t.Fatalf("attempt %d: progress %+v, want %+v", attempt, p, want)
			}
			got := f.results(t, job)
			if attempt == 1 && fmt.Sprint(got) != fmt.Sprint(rs) {
				t.Errorf("a retried chunk changed its results:\n%v\n%v", rs, got)
			}
			rs = got
		}
		if stored, _ := f.store.Jobs.Get(ctx, f.org.ID, job.ID); stored.Progress() != p {
			t.Errorf("job row progress %+v, want %+v", stored.Progress(), p)
		}
		if len(rs) != 5 || rs[1].Status != jobs.ResultSuccess || rs[1].EntityID != models.FormatID(f.users[1].ID) ||
			rs[2].Status != jobs.ResultError || rs[2].EntityID != models.FormatID(f.users[2].ID) ||
			rs[3].Status != jobs.ResultSuccess || rs[5].Status != jobs.ResultError || rs[5].EntityID != "" ||
			rs[4].Status != jobs.ResultError || !strings.Contains(rs[4].Message, "also in row 1") {
			t.Errorf("results %+v", rs)
		}
		es := f.enrollments(t, 3)
		if len(es) != 4 || string(es[enrollment.FactorTOTP].Secret) != "sealed" || es[enrollment.FactorTOTP].Value != "" ||
			es[enrollment.FactorSmartCard].Thumbprint != "ab12" || es[enrollment.FactorSmartCard].ExpiresAt == nil ||
			!es[enrollment.FactorSmartCard].ExpiresAt.Equal(notAfter) || es[enrollment.FactorEmailOTP].Secret != nil ||
			es[enrollment.FactorEmailOTP].ExpiresAt != nil || es[enrollment.FactorSMSOTP].SourceRow != 3 || es[enrollment.FactorSMSOTP].JobID != job.ID {
			t.Errorf("user 3's enrollments %+v", es)
		}
		if es := f.enrollments(t, 1); es[enrollment.FactorEmailOTP].Value != "otp1@example.com" {
			t.Errorf("user 1 holds %+v, want row 1's data", es)
		}
		if cur, err := f.enroll.Cursor(ctx, job.ID, 6); err != nil || cur != 600 {
			t.Errorf("cursor of row 6: %d, %v", cur, err)
		}

		// The next chunk: user 3 again, and user 2, whose row 2 failed.
		p = f.apply(t, job, false, p, f.row(6, 3, "late@example.com"), f.row(7, 2, "otp2@example.com"), f.row(8, 4, "otp4@example.com"))
		rs = f.results(t, job)
		if p != (jobs.JobProgress{Processed: 8, Total: 8, Success: 4, Failed: 4}) ||
			rs[6].Status != jobs.ResultError || !strings.Contains(rs[6].Message, "the user is also in row 3") ||
			rs[7].Status != jobs.ResultSuccess || rs[8].Status != jobs.ResultSuccess {
			t.Errorf("second chunk: %+v, %+v", p, rs)
		}
		if es := f.enrollments(t, 3); es[enrollment.FactorEmailOTP].Value != "otp3@example.com" {
			t.Errorf("a later row replaced row 3's data: %+v", es)
		}

		// Another job without overwrite: user 1 is enrolled in both factors
		// (kept, an error); user 5 in none (written); user 6 in Email OTP by
		// this job and in SMS OTP by the first (partly kept).
		if _, err := f.enroll.ApplyChunk(ctx, &enrollment.EnrollChunk{OrgID: f.org.ID, JobID: job.ID, Rows: []enrollment.ChunkRow{{Row: 9, UserID: f.users[6].ID,
			Enrollments: f.row(9, 6, "").Enrollments[1:]}}, Before: p, NextRow: 10, NextOffset: -1, Names: f.names}); err != nil {
			t.Fatal(err)
		}
		second := f.newJob(t)
		p = f.apply(t, second, false, jobs.JobProgress{Total: 3},
			f.row(1, 1, "changed@example.com"), f.row(2, 5, "otp5@example.com"), f.row(3, 6, "otp6@example.com"))
		rs = f.results(t, second)
		if p != (jobs.JobProgress{Processed: 3, Total: 3, Success: 2, Failed: 1}) ||
			rs[1].Status != jobs.ResultError || !strings.Contains(rs[1].Message, "already enrolled in Email OTP, SMS OTP; kept the existing data") ||
			rs[2].Status != jobs.ResultSuccess || rs[2].Message != "" ||
			rs[3].Status != jobs.ResultSuccess || !strings.Contains(rs[3].Message, "kept the existing data of SMS OTP") {
			t.Errorf("without overwrite: %+v, %+v", p, rs)
		}
		if es := f.enrollments(t, 1); es[enrollment.FactorEmailOTP].Value != "otp1@example.com" || es[enrollment.FactorEmailOTP].JobID != job.ID {
			t.Errorf("kept data changed: %+v", es)
		}
		if es := f.enrollments(t, 6); es[enrollment.FactorEmailOTP].Value != "otp6@example.com" || es[enrollment.FactorSMSOTP].JobID != job.ID {
			t.Errorf("user 6: %+v", es)
		}

		// With overwrite another job's data is replaced.
		third := f.newJob(t)
		p = f.apply(t, third, true, jobs.JobProgress{Total: 1}, f.row(1, 1, "changed@example.com"))
		if rs := f.results(t, third); p.Success != 1 || rs[1].Status != jobs.ResultSuccess || rs[1].Message != "" {
			t.Errorf("with overwrite: %+v, %+v", p, rs)
		}
		if es := f.enrollments(t, 1); es[enrollment.FactorEmailOTP].Value != "changed@example.com" || es[enrollment.FactorEmailOTP].JobID != third.ID {
			t.Errorf("overwrite kept %+v", es)
		}

		// A finished job takes no more chunks; a deleted one is gone.
		if err := f.store.Jobs.Finish(ctx, f.org.ID, third.ID, jobs.JobCompleted, "", p); err != nil {
			t.Fatal(err)
		}
		_, err := f.enroll.ApplyChunk(ctx, &enrollment.EnrollChunk{OrgID: f.org.ID, JobID: third.ID, Rows: []enrollment.ChunkRow{f.row(2, 2, "x@example.com")}, NextRow: 3, NextOffset: -1})
		if models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("a chunk of a finished job: %v, want ECONFLICT", err)
		}
		if err = f.store.Jobs.Delete(ctx, f.org.ID, second.ID); err != nil {
			t.Fatal(err)
		}
		_, err = f.enroll.ApplyChunk(ctx, &enrollment.EnrollChunk{OrgID: f.org.ID, JobID: second.ID, Rows: []enrollment.ChunkRow{f.row(4, 2, "x@example.com")}, NextRow: 5, NextOffset: -1})
		if models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("a chunk of a deleted job: %v, want ENOTFOUND", err)
		}
		if es := f.enrollments(t, 2); es[enrollment.FactorEmailOTP].Value == "x@example.com" {
			t.Error("a refused chunk left its data")
		}
	})
}

// Results of seqs that do not follow each other are recorded, and
// recorded again, like any others.
func TestJobStore_RecordChunkScatteredSeqs(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		job := modeltest.NewJob(t, store, org)
		if _, err := store.Jobs.Start(ctx, org.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		first := []jobs.JobResult{{Seq: 7, EntityID: "a", Status: jobs.ResultSuccess}, {Seq: 3, EntityID: "b", Status: jobs.ResultError, Message: "bad"}, {Seq: 10, EntityID: "c", Status: jobs.ResultSuccess}}
		if err := store.Jobs.RecordChunk(ctx, org.ID, job.ID, first, jobs.JobProgress{Processed: 3, Total: 9}); err != nil {
			t.Fatal(err)
		}
		again := []jobs.JobResult{{Seq: 10, EntityID: "c", Status: jobs.ResultError, Message: "now bad"}, {Seq: 4, EntityID: "d", Status: jobs.ResultSuccess}}
		if err := store.Jobs.RecordChunk(ctx, org.ID, job.ID, again, jobs.JobProgress{Processed: 4, Total: 9}); err != nil {
			t.Fatal(err)
		}
		rs, err := store.Jobs.Results(ctx, job.ID, "", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, r := range rs {
			got += fmt.Sprintf("%d %s %s %q; ", r.Seq, r.EntityID, r.Status, r.Message)
		}
		if want := `3 b ERROR "bad"; 4 d SUCCESS ""; 7 a SUCCESS ""; 10 c ERROR "now bad"; `; got != want {
			t.Errorf("results %s, want %s", got, want)
		}
	})
}
