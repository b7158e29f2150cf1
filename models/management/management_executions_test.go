package management_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/management"
	"iam/models/modeltest"
)

func targetUsers(t *testing.T, m *management.MgmtStore, execID int64, attempt int) []int64 {
	t.Helper()
	var out []int64
	var after int64
	for {
		ts, err := m.Targets(t.Context(), execID, attempt, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 0 {
			return out
		}
		for _, tg := range ts {
			out = append(out, tg.UserID)
			after = tg.Seq
		}
	}
}

func TestMgmtStore_CreateExecution(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		u := f.users
		up := f.upload(t, management.ActionMoveUsers, []string{"Employee ID"}, [][]string{{"E3"}, {"nobody"}, {"E1"}, {"E3"}})

		exec, job, err := m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionMoveUsers,
			Selection: management.Selection{UploadID: up.ID}, TargetContainer: "OU=New,DC=example", CreatedBy: u[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if exec.Status != management.ExecYetToStart || exec.Attempt != 1 || exec.Total != 2 || exec.JobID != job.ID ||
			job.Status != jobs.JobQueued || job.Module != "Management" || job.Kind != jobs.MgmtJobKind {
			t.Errorf("execution %+v, job %+v", exec, job)
		}
		if got := targetUsers(t, m, exec.ID, 1); !slices.Equal(got, []int64{u[3].ID, u[1].ID}) {
			t.Errorf("upload targets = %v, want the MAPPED rows' users in row order", got)
		}
		stored, err := f.store.Jobs.Get(ctx, f.org.ID, job.ID)
		if err != nil || stored.Total != 2 {
			t.Errorf("job = %+v, %v", stored, err)
		}

		ids, _, err := m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers,
			Selection: management.Selection{UserIDs: []int64{u[4].ID, u[2].ID, u[4].ID, 12345}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := targetUsers(t, m, ids.ID, 1); !slices.Equal(got, []int64{u[4].ID, u[2].ID, 12345}) {
			t.Errorf("user_ids targets = %v (unknown ids kept, to fail as not found)", got)
		}
		byFilter, _, err := m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers,
			Selection: management.Selection{Filter: `employeeID eq "E0" or employeeID eq "E2"`}})
		if err != nil {
			t.Fatal(err)
		}
		if got := targetUsers(t, m, byFilter.ID, 1); !slices.Equal(got, []int64{u[0].ID, u[2].ID}) {
			t.Errorf("filter targets = %v", got)
		}

		other := modeltest.NewOrg(t, f.store)
		for name, c := range map[string]struct {
			n    management.NewExecution
			code string
		}{
			"two selectors":        {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{UploadID: up.ID, Filter: `id pr`}}, models.EINVALID},
			"no selector":          {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers}, models.EINVALID},
			"bad filter":           {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{Filter: `password eq "x"`}}, models.EINVALID},
			"nobody":               {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{Filter: `email eq "none"`}}, models.EINVALID},
			"move without target":  {management.NewExecution{OrgID: f.org.ID, Action: management.ActionMoveUsers, Selection: management.Selection{UserIDs: []int64{u[0].ID}}}, models.EINVALID},
			"move to a bad target": {management.NewExecution{OrgID: f.org.ID, Action: management.ActionMoveUsers, Selection: management.Selection{UserIDs: []int64{u[0].ID}}, TargetContainer: "Sales"}, models.EINVALID},
			"delete with target":   {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{UserIDs: []int64{u[0].ID}}, TargetContainer: "OU=x"}, models.EINVALID},
			"upload of an action":  {management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{UploadID: up.ID}}, models.ENOTFOUND},
			"upload of an org":     {management.NewExecution{OrgID: other.ID, Action: management.ActionMoveUsers, Selection: management.Selection{UploadID: up.ID}, TargetContainer: "OU=x"}, models.ENOTFOUND},
			"another org's filter": {management.NewExecution{OrgID: other.ID, Action: management.ActionDeleteUsers, Selection: management.Selection{Filter: `department eq "Sales"`}}, models.EINVALID},
		} {
			t.Run(name, func(t *testing.T) {
				_, _, err := m.CreateExecution(ctx, c.n)
				modeltest.WantCode(t, err, c.code)
			})
		}
		if got, err := m.GetExecution(ctx, other.ID, management.ActionMoveUsers, exec.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another organization's execution = %+v, %v", got, err)
		}
		if _, err := m.GetExecution(ctx, f.org.ID, management.ActionDeleteUsers, exec.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another action's execution = %v", err)
		}
	})
}

// A store failure while writing the targets of an upload-based selection
// is that failure, not "names no users": the failure is not the client's.
func TestMgmtStore_CreateExecutionFromUploadReportsStoreFailure(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		up := f.upload(t, management.ActionDeleteUsers, []string{"Employee ID"}, [][]string{{"E1"}, {"E2"}})
		// The upload is read; inserting its targets then fails.
		if _, err := db.ExecContext(ctx, "ALTER TABLE mgmt_execution_targets RENAME TO mgmt_execution_targets_gone"); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.store.Management.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID,
			Action: management.ActionDeleteUsers, Selection: management.Selection{UploadID: up.ID}})
		modeltest.WantCode(t, err, models.EINTERNAL)
		if !strings.Contains(err.Error(), "insert targets") {
			t.Errorf("err = %v, want the failed insert of the targets", err)
		}
	})
}

// TestMgmtStore_ExecutionLifecycle walks an execution through its states:
// started, results recorded twice (idempotent), finished with errors,
// retried over exactly the failed and unreached users, completed, and a
// retry with nothing failed refused; then a deleted job interrupts.
func TestMgmtStore_ExecutionLifecycle(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		u := f.users
		org := f.org.ID
		all := []int64{u[0].ID, u[1].ID, u[2].ID, u[3].ID}
		exec, job, err := m.CreateExecution(ctx, management.NewExecution{OrgID: org, Action: management.ActionDeleteUsers,
			Selection: management.Selection{UserIDs: all}, CreatedBy: u[4].ID})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ECONFLICT) // not finished
		if err = m.StartAttempt(ctx, org, exec.ID, 1); err != nil {
			t.Fatal(err)
		}
		if err = m.StartAttempt(ctx, org, exec.ID, 1); err != nil {
			t.Fatalf("a second start: %v", err)
		}
		got, _ := m.GetExecution(ctx, org, management.ActionDeleteUsers, exec.ID)
		if got.Status != management.ExecPending {
			t.Errorf("status after start = %s", got.Status)
		}
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ECONFLICT) // running
		chunk := []management.ExecutionResult{
			{Seq: 1, UserID: u[0].ID, Email: "a", Status: management.ExecResultSuccess},
			{Seq: 2, UserID: u[1].ID, Email: "b", Status: management.ExecResultFailure, Message: "boom"},
		}
		for range 2 {
			if err = m.RecordResults(ctx, org, exec.ID, 1, slices.Clone(chunk)); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = m.GetExecution(ctx, org, management.ActionDeleteUsers, exec.ID)
		if got.SuccessCount != 1 || got.FailedCount != 1 {
			t.Errorf("counts while running = %d/%d, want 1/1", got.SuccessCount, got.FailedCount)
		}
		// The attempt times out before users 3 and 4.
		if err = m.FinishAttempt(ctx, org, exec.ID, 1, management.ExecTimeOut); err != nil {
			t.Fatal(err)
		}
		if err = m.FinishAttempt(ctx, org, exec.ID, 1, management.ExecCompleted); err != nil {
			t.Fatalf("finishing again: %v", err)
		}
		got, _ = m.GetExecution(ctx, org, management.ActionDeleteUsers, exec.ID)
		if got.Status != management.ExecTimeOut || got.SuccessCount != 1 || got.FailedCount != 3 || got.FinishedAt == nil {
			t.Errorf("after time out = %+v", got)
		}
		modeltest.WantCode(t, m.RecordResults(ctx, org, exec.ID, 1, chunk), models.ECONFLICT)

		retried, job2, err := m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, u[4].ID)
		if err != nil {
			t.Fatal(err)
		}
		if retried.Attempt != 2 || retried.Status != management.ExecYetToStart || job2.ID == job.ID || retried.JobID != job2.ID {
			t.Errorf("retry = %+v, job %d", retried, job2.ID)
		}
		if got := targetUsers(t, m, exec.ID, 2); !slices.Equal(got, []int64{u[1].ID, u[2].ID, u[3].ID}) {
			t.Errorf("retry targets = %v, want the failed and the unreached", got)
		}
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ECONFLICT)
		modeltest.WantCode(t, m.RecordResults(ctx, org, exec.ID, 1, chunk), models.ECONFLICT) // an old attempt
		if err = m.StartAttempt(ctx, org, exec.ID, 2); err != nil {
			t.Fatal(err)
		}
		if err = m.RecordResults(ctx, org, exec.ID, 2, []management.ExecutionResult{
			{Seq: 1, UserID: u[1].ID, Status: management.ExecResultSuccess},
			{Seq: 2, UserID: u[2].ID, Status: management.ExecResultSuccess},
			{Seq: 3, UserID: u[3].ID, Status: management.ExecResultSuccess},
		}); err != nil {
			t.Fatal(err)
		}
		if err = m.FinishAttempt(ctx, org, exec.ID, 2, management.ExecCompleted); err != nil {
			t.Fatal(err)
		}
		got, _ = m.GetExecution(ctx, org, management.ActionDeleteUsers, exec.ID)
		if got.Status != management.ExecCompleted || got.SuccessCount != 4 || got.FailedCount != 0 || got.Attempt != 2 {
			t.Errorf("after the retry = %+v", got)
		}
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ECONFLICT) // nothing failed

		// Both attempts' results stay listable.
		for attempt, want := range map[int]int{1: 2, 2: 3, 0: 3} {
			p, _ := listing.Parse(url.Values{}, management.ExecutionResultListing)
			rs, _, listErr := m.ListResults(ctx, org, management.ActionDeleteUsers, exec.ID, attempt, p)
			if listErr != nil || len(rs) != want {
				t.Errorf("attempt %d: %d results, %v; want %d", attempt, len(rs), listErr, want)
			}
		}
		p, _ := listing.Parse(url.Values{"filter": {`status eq "failure"`}}, management.ExecutionResultListing)
		if rs, _, _ := m.ListResults(ctx, org, management.ActionDeleteUsers, exec.ID, 1, p); len(rs) != 1 || rs[0].Message != "boom" {
			t.Errorf("failures of attempt 1 = %+v", rs)
		}
		if _, _, err = m.ListResults(ctx, org, management.ActionDeleteUsers, exec.ID, 3, p); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("attempt 3 = %v", err)
		}
		if atts, _ := m.Attempts(ctx, exec.ID); len(atts) != 2 || atts[0].Status != management.ExecTimeOut || atts[1].Status != management.ExecCompleted {
			t.Errorf("attempts = %+v", atts)
		}

		// The CSV export's reads: which attempt, then keyset pages by seq.
		for asked, want := range map[int]int{0: 2, 1: 1, 2: 2} {
			if got, attErr := m.ExecutionAttempt(ctx, org, management.ActionDeleteUsers, exec.ID, asked); attErr != nil || got != want {
				t.Errorf("ExecutionAttempt(%d) = %d, %v; want %d", asked, got, attErr, want)
			}
		}
		_, err = m.ExecutionAttempt(ctx, org, management.ActionDeleteUsers, exec.ID, 3)
		modeltest.WantCode(t, err, models.ENOTFOUND)
		_, err = m.ExecutionAttempt(ctx, org, management.ActionMoveUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ENOTFOUND) // another action's path
		_, err = m.ExecutionAttempt(ctx, modeltest.NewOrg(t, f.store).ID, management.ActionDeleteUsers, exec.ID, 0)
		modeltest.WantCode(t, err, models.ENOTFOUND) // another organization
		var seqs []int64
		for after := int64(0); ; {
			page, pageErr := m.ResultsAfter(ctx, exec.ID, 2, after, 2)
			if pageErr != nil {
				t.Fatal(pageErr)
			}
			for _, r := range page {
				seqs = append(seqs, r.Seq)
			}
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].Seq
		}
		if !slices.Equal(seqs, []int64{1, 2, 3}) {
			t.Errorf("ResultsAfter pages of attempt 2 = %v, want 1 2 3", seqs)
		}

		// A deleted job interrupts its execution.
		gone, gjob, err := m.CreateExecution(ctx, management.NewExecution{OrgID: org, Action: management.ActionDeleteUsers,
			Selection: management.Selection{UserIDs: all}})
		if err != nil {
			t.Fatal(err)
		}
		if err = f.store.Jobs.Delete(ctx, org, gjob.ID); err != nil {
			t.Fatal(err)
		}
		var stored string // as the deletion left it, before any read
		if err = db.NewSelect().Table("mgmt_executions").Column("status").Where("id = ?", gone.ID).Scan(ctx, &stored); err != nil || stored != string(management.ExecInterrupted) {
			t.Errorf("stored status after the job's deletion = %q, %v", stored, err)
		}
		got, err = m.GetExecution(ctx, org, management.ActionDeleteUsers, gone.ID)
		if err != nil || got.Status != management.ExecInterrupted || got.FailedCount != 4 {
			t.Errorf("execution of a deleted job = %+v, %v", got, err)
		}
		if e, a, err := m.ExecutionByJob(ctx, org, job2.ID); err != nil || e.ID != exec.ID || a.Attempt != 2 {
			t.Errorf("ExecutionByJob = %v %v %v", e, a, err)
		}
	})
}
