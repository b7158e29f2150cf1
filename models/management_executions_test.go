package models_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/listing"
)

func targetUsers(t *testing.T, m *models.MgmtStore, execID int64, attempt int) []int64 {
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
		up := f.upload(t, models.ActionMoveUsers, []string{"Employee ID"}, [][]string{{"E3"}, {"nobody"}, {"E1"}, {"E3"}})

		exec, job, err := m.CreateExecution(ctx, models.NewExecution{OrgID: f.org.ID, Action: models.ActionMoveUsers,
			Selection: models.Selection{UploadID: up.ID}, TargetContainer: "OU=New,DC=example", CreatedBy: u[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		if exec.Status != models.ExecYetToStart || exec.Attempt != 1 || exec.Total != 2 || exec.JobID != job.ID ||
			job.Status != models.JobQueued || job.Module != "Management" || job.Kind != models.MgmtJobKind {
			t.Errorf("execution %+v, job %+v", exec, job)
		}
		if got := targetUsers(t, m, exec.ID, 1); !slices.Equal(got, []int64{u[3].ID, u[1].ID}) {
			t.Errorf("upload targets = %v, want the MAPPED rows' users in row order", got)
		}
		stored, err := f.store.Jobs.Get(ctx, f.org.ID, job.ID)
		if err != nil || stored.Total != 2 {
			t.Errorf("job = %+v, %v", stored, err)
		}

		ids, _, err := m.CreateExecution(ctx, models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers,
			Selection: models.Selection{UserIDs: []int64{u[4].ID, u[2].ID, u[4].ID, 12345}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := targetUsers(t, m, ids.ID, 1); !slices.Equal(got, []int64{u[4].ID, u[2].ID, 12345}) {
			t.Errorf("user_ids targets = %v (unknown ids kept, to fail as not found)", got)
		}
		byFilter, _, err := m.CreateExecution(ctx, models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers,
			Selection: models.Selection{Filter: `employeeID eq "E0" or employeeID eq "E2"`}})
		if err != nil {
			t.Fatal(err)
		}
		if got := targetUsers(t, m, byFilter.ID, 1); !slices.Equal(got, []int64{u[0].ID, u[2].ID}) {
			t.Errorf("filter targets = %v", got)
		}

		other := newOrg(t, f.store)
		for name, c := range map[string]struct {
			n    models.NewExecution
			code string
		}{
			"two selectors":        {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{UploadID: up.ID, Filter: `id pr`}}, models.EINVALID},
			"no selector":          {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers}, models.EINVALID},
			"bad filter":           {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{Filter: `password eq "x"`}}, models.EINVALID},
			"nobody":               {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{Filter: `email eq "none"`}}, models.EINVALID},
			"move without target":  {models.NewExecution{OrgID: f.org.ID, Action: models.ActionMoveUsers, Selection: models.Selection{UserIDs: []int64{u[0].ID}}}, models.EINVALID},
			"move to a bad target": {models.NewExecution{OrgID: f.org.ID, Action: models.ActionMoveUsers, Selection: models.Selection{UserIDs: []int64{u[0].ID}}, TargetContainer: "Sales"}, models.EINVALID},
			"delete with target":   {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{UserIDs: []int64{u[0].ID}}, TargetContainer: "OU=x"}, models.EINVALID},
			"upload of an action":  {models.NewExecution{OrgID: f.org.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{UploadID: up.ID}}, models.ENOTFOUND},
			"upload of an org":     {models.NewExecution{OrgID: other.ID, Action: models.ActionMoveUsers, Selection: models.Selection{UploadID: up.ID}, TargetContainer: "OU=x"}, models.ENOTFOUND},
			"another org's filter": {models.NewExecution{OrgID: other.ID, Action: models.ActionDeleteUsers, Selection: models.Selection{Filter: `department eq "Sales"`}}, models.EINVALID},
		} {
			t.Run(name, func(t *testing.T) {
				_, _, err := m.CreateExecution(ctx, c.n)
				wantCode(t, err, c.code)
			})
		}
		if got, err := m.GetExecution(ctx, other.ID, models.ActionMoveUsers, exec.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another organization's execution = %+v, %v", got, err)
		}
		if _, err := m.GetExecution(ctx, f.org.ID, models.ActionDeleteUsers, exec.ID); models.ErrorCode(err) != models.ENOTFOUND {
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
		up := f.upload(t, models.ActionDeleteUsers, []string{"Employee ID"}, [][]string{{"E1"}, {"E2"}})
		// The upload is read; inserting its targets then fails.
		if _, err := db.ExecContext(ctx, "ALTER TABLE mgmt_execution_targets RENAME TO mgmt_execution_targets_gone"); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.store.Management.CreateExecution(ctx, models.NewExecution{OrgID: f.org.ID,
			Action: models.ActionDeleteUsers, Selection: models.Selection{UploadID: up.ID}})
		wantCode(t, err, models.EINTERNAL)
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
		exec, job, err := m.CreateExecution(ctx, models.NewExecution{OrgID: org, Action: models.ActionDeleteUsers,
			Selection: models.Selection{UserIDs: all}, CreatedBy: u[4].ID})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = m.Retry(ctx, org, models.ActionDeleteUsers, exec.ID, 0)
		wantCode(t, err, models.ECONFLICT) // not finished
		if err = m.StartAttempt(ctx, org, exec.ID, 1); err != nil {
			t.Fatal(err)
		}
		if err = m.StartAttempt(ctx, org, exec.ID, 1); err != nil {
			t.Fatalf("a second start: %v", err)
		}
		got, _ := m.GetExecution(ctx, org, models.ActionDeleteUsers, exec.ID)
		if got.Status != models.ExecPending {
			t.Errorf("status after start = %s", got.Status)
		}
		_, _, err = m.Retry(ctx, org, models.ActionDeleteUsers, exec.ID, 0)
		wantCode(t, err, models.ECONFLICT) // running
		chunk := []models.ExecutionResult{
			{Seq: 1, UserID: u[0].ID, Email: "a", Status: models.ExecResultSuccess},
			{Seq: 2, UserID: u[1].ID, Email: "b", Status: models.ExecResultFailure, Message: "boom"},
		}
		for range 2 {
			if err = m.RecordResults(ctx, org, exec.ID, 1, slices.Clone(chunk)); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = m.GetExecution(ctx, org, models.ActionDeleteUsers, exec.ID)
		if got.SuccessCount != 1 || got.FailedCount != 1 {
			t.Errorf("counts while running = %d/%d, want 1/1", got.SuccessCount, got.FailedCount)
		}
		// The attempt times out before users 3 and 4.
		if err = m.FinishAttempt(ctx, org, exec.ID, 1, models.ExecTimeOut); err != nil {
			t.Fatal(err)
		}
		if err = m.FinishAttempt(ctx, org, exec.ID, 1, models.ExecCompleted); err != nil {
			t.Fatalf("finishing again: %v", err)
		}
		got, _ = m.GetExecution(ctx, org, models.ActionDeleteUsers, exec.ID)
		if got.Status != models.ExecTimeOut || got.SuccessCount != 1 || got.FailedCount != 3 || got.FinishedAt == nil {
			t.Errorf("after time out = %+v", got)
		}
		wantCode(t, m.RecordResults(ctx, org, exec.ID, 1, chunk), models.ECONFLICT)

		retried, job2, err := m.Retry(ctx, org, models.ActionDeleteUsers, exec.ID, u[4].ID)
		if err != nil {
			t.Fatal(err)
		}
		if retried.Attempt != 2 || retried.Status != models.ExecYetToStart || job2.ID == job.ID || retried.JobID != job2.ID {
			t.Errorf("retry = %+v, job %d", retried, job2.ID)
		}
		if got := targetUsers(t, m, exec.ID, 2); !slices.Equal(got, []int64{u[1].ID, u[2].ID, u[3].ID}) {
			t.Errorf("retry targets = %v, want the failed and the unreached", got)
		}
		_, _, err = m.Retry(ctx, org, models.ActionDeleteUsers, exec.ID, 0)
		wantCode(t, err, models.ECONFLICT)
		wantCode(t, m.RecordResults(ctx, org, exec.ID, 1, chunk), models.ECONFLICT) // an old attempt
		if err = m.StartAttempt(ctx, org, exec.ID, 2); err != nil {
			t.Fatal(err)
		}
		if err = m.RecordResults(ctx, org, exec.ID, 2, []models.ExecutionResult{
			{Seq: 1, UserID: u[1].ID, Status: models.ExecResultSuccess},
			{Seq: 2, UserID: u[2].ID, Status: models.ExecResultSuccess},
			{Seq: 3, UserID: u[3].ID, Status: models.ExecResultSuccess},
		}); err != nil {
			t.Fatal(err)
		}
		if err = m.FinishAttempt(ctx, org, exec.ID, 2, models.ExecCompleted); err != nil {
			t.Fatal(err)
		}
		got, _ = m.GetExecution(ctx, org, models.ActionDeleteUsers, exec.ID)
		if got.Status != models.ExecCompleted || got.SuccessCount != 4 || got.FailedCount != 0 || got.Attempt != 2 {
			t.Errorf("after the retry = %+v", got)
		}
		_, _, err = m.Retry(ctx, org, models.ActionDeleteUsers, exec.ID, 0)
		wantCode(t, err, models.ECONFLICT) // nothing failed

		// Both attempts' results stay listable.
		for attempt, want := range map[int]int{1: 2, 2: 3, 0: 3} {
			p, _ := listing.Parse(url.Values{}, models.ExecutionResultListing)
			rs, _, listErr := m.ListResults(ctx, org, models.ActionDeleteUsers, exec.ID, attempt, p)
			if listErr != nil || len(rs) != want {
				t.Errorf("attempt %d: %d results, %v; want %d", attempt, len(rs), listErr, want)
			}
		}
		p, _ := listing.Parse(url.Values{"filter": {`status eq "failure"`}}, models.ExecutionResultListing)
		if rs, _, _ := m.ListResults(ctx, org, models.ActionDeleteUsers, exec.ID, 1, p); len(rs) != 1 || rs[0].Message != "boom" {
			t.Errorf("failures of attempt 1 = %+v", rs)
		}
		if _, _, err = m.ListResults(ctx, org, models.ActionDeleteUsers, exec.ID, 3, p); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("attempt 3 = %v", err)
		}
		if atts, _ := m.Attempts(ctx, exec.ID); len(atts) != 2 || atts[0].Status != models.ExecTimeOut || atts[1].Status != models.ExecCompleted {
			t.Errorf("attempts = %+v", atts)
		}

		// A deleted job interrupts its execution.
		gone, gjob, err := m.CreateExecution(ctx, models.NewExecution{OrgID: org, Action: models.ActionDeleteUsers,
			Selection: models.Selection{UserIDs: all}})
		if err != nil {
			t.Fatal(err)
		}
		if err = f.store.Jobs.Delete(ctx, org, gjob.ID); err != nil {
			t.Fatal(err)
		}
		got, err = m.GetExecution(ctx, org, models.ActionDeleteUsers, gone.ID)
		if err != nil || got.Status != models.ExecInterrupted || got.FailedCount != 4 {
			t.Errorf("execution of a deleted job = %+v, %v", got, err)
		}
		if e, a, err := m.ExecutionByJob(ctx, org, job2.ID); err != nil || e.ID != exec.ID || a.Attempt != 2 {
			t.Errorf("ExecutionByJob = %v %v %v", e, a, err)
		}
	})
}
