package management_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/jobs"
	"iam/models/management"
	"iam/models/modeltest"
)

// targetsOf writes ev's targets as "type:id:name" items, with their
// changes as field=[old,new].
func targetsOf(t *testing.T, ev models.EventRecord) string {
	t.Helper()
	var out []string
	for _, tg := range ev.Targets {
		s := tg.Type + ":" + tg.ID + ":" + tg.DisplayName
		for _, c := range tg.Changes {
			b, err := json.Marshal([]any{c.Old, c.New})
			if err != nil {
				t.Fatal(err)
			}
			s += " " + c.Field + "=" + string(b)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestMgmtStore_ViewColumnsAuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newMgmtFixture(t, db)
		m := f.store.Management
		if _, err := m.SetViewColumns(ctx, f.org.ID, management.ActionMoveUsers, []string{"email", "email"}); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("refused columns: %v", err)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ManagementViewColumnsUpdated, 0)
		if _, err := m.SetViewColumns(ctx, f.org.ID, management.ActionMoveUsers, []string{"email", "title"}); err != nil {
			t.Fatal(err)
		}
		ev := modeltest.WantEvents(t, db, f.org.ID, audit.ManagementViewColumnsUpdated, 1)[0]
		want := `management_view:move-users:Move users columns=[["firstName","lastName","email","container"],["email","title"]]`
		if got := targetsOf(t, ev); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}
		if ev.Actor.ID != "7" || ev.RequestID != "req-1" {
			t.Errorf("origin of %+v", ev)
		}
	})
}

func TestMgmtStore_UploadAuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newMgmtFixture(t, db)
		m := f.store.Management
		header, match, err := management.UploadHeader([]string{"Primary Email", "Note"})
		if err != nil {
			t.Fatal(err)
		}
		empty := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionDeleteUsers, FileName: "empty.csv", Header: header, MatchColumns: match}
		modeltest.WantCode(t, m.CreateUpload(ctx, empty, nil), models.EINVALID)
		modeltest.WantEvents(t, db, f.org.ID, audit.ManagementUploadCreated, 0)

		up := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionDeleteUsers, FileName: "leavers.csv", Header: header, MatchColumns: match}
		var rows []management.UploadRecord
		for i := range 4 {
			rows = append(rows, management.UploadRecord{Fields: []string{fmt.Sprintf("user%d@example.com", i), "x"}})
		}
		if err = m.CreateUpload(ctx, up, rows); err != nil {
			t.Fatal(err)
		}
		ev := modeltest.WantEvents(t, db, f.org.ID, audit.ManagementUploadCreated, 1)[0]
		if got, want := targetsOf(t, ev), fmt.Sprintf("management_upload:%d:leavers.csv", up.ID); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}

		// Rows deleted: the upload (its row count), then the rows. A
		// delete that removes nothing, or is refused, records nothing.
		if _, _, err = m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, []int64{99}, ""); err != nil {
			t.Fatal(err)
		}
		if _, _, err = m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, nil, `nope eq "x"`); models.ErrorCode(err) != models.EINVALID {
			t.Fatalf("bad filter: %v", err)
		}
		modeltest.WantEvents(t, db, f.org.ID, audit.ManagementUploadDataDeleted, 0)
		if _, _, err = m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, []int64{3, 1, 99}, ""); err != nil {
			t.Fatal(err)
		}
		ev = modeltest.WantEvents(t, db, f.org.ID, audit.ManagementUploadDataDeleted, 1)[0]
		want := fmt.Sprintf("management_upload:%d:leavers.csv row_count=[4,2], management_upload_row:1:row 1, management_upload_row:3:row 3", up.ID)
		if got := targetsOf(t, ev); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}

		// An upload resolved by a job: the upload and its job.
		big := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, FileName: "big.csv", Header: header,
			MatchColumns: match, FileRows: 10}
		file := jobs.FileUpload{Name: "big.csv", ContentType: "text/csv", Body: strings.NewReader("the file"), MaxSize: 1 << 20}
		job, err := m.CreateResolvingUpload(ctx, big, file, "UTF-8", 42)
		if err != nil {
			t.Fatal(err)
		}
		ev = modeltest.WantEvents(t, db, f.org.ID, audit.ManagementUploadCreated, 2)[1]
		if got, want := targetsOf(t, ev), fmt.Sprintf("management_upload:%d:big.csv, job:%d:Resolve upload", big.ID, job.ID); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}
	})
}

func TestMgmtStore_ExecutionAuditEvents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := modeltest.AdminOrigin(t.Context())
		f := newMgmtFixture(t, db)
		m := f.store.Management
		org := f.org.ID
		u := f.users
		_, _, err := m.CreateExecution(ctx, management.NewExecution{OrgID: org, Action: management.ActionDeleteUsers,
			Selection: management.Selection{Filter: `email eq "nobody@example.com"`}})
		modeltest.WantCode(t, err, models.EINVALID) // selects nobody
		modeltest.WantEvents(t, db, org, audit.ManagementExecutionStarted, 0)

		exec, job, err := m.CreateExecution(ctx, management.NewExecution{OrgID: org, Action: management.ActionDeleteUsers,
			Selection: management.Selection{UserIDs: []int64{u[0].ID, u[1].ID}}, CreatedBy: u[4].ID})
		if err != nil {
			t.Fatal(err)
		}
		ev := modeltest.WantEvents(t, db, org, audit.ManagementExecutionStarted, 1)[0]
		if got, want := targetsOf(t, ev), fmt.Sprintf("management_execution:%d:Delete users, job:%d:Delete users", exec.ID, job.ID); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}

		// The apply moves no event per user: the users are the job's
		// results.
		if _, err = m.StartJobAttempt(ctx, org, job.ID); err != nil {
			t.Fatal(err)
		}
		res, err := m.ApplyChunk(ctx, org, exec.ID, 1, 0, 100)
		if err != nil || res.Success != 2 || !res.Done {
			t.Fatalf("apply = %+v, %v", res, err)
		}
		modeltest.WantEvents(t, db, org, audit.UserDeleted, 0)
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, u[4].ID)
		modeltest.WantCode(t, err, models.ECONFLICT) // still running
		if err = m.FinishAttempt(ctx, org, exec.ID, 1, management.ExecCompleted); err != nil {
			t.Fatal(err)
		}
		_, _, err = m.Retry(ctx, org, management.ActionDeleteUsers, exec.ID, u[4].ID)
		modeltest.WantCode(t, err, models.ECONFLICT) // nothing failed
		modeltest.WantEvents(t, db, org, audit.ManagementExecutionRetried, 0)

		// A retry: the new attempt and job.
		move, mjob, err := m.CreateExecution(ctx, management.NewExecution{OrgID: org, Action: management.ActionMoveUsers,
			Selection: management.Selection{UserIDs: []int64{u[2].ID}}, TargetContainer: "OU=Sales,DC=example,DC=com"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err = m.StartJobAttempt(ctx, org, mjob.ID); err != nil {
			t.Fatal(err)
		}
		if err = m.FinishAttempt(ctx, org, move.ID, 1, management.ExecTimeOut); err != nil {
			t.Fatal(err)
		}
		_, rjob, err := m.Retry(ctx, org, management.ActionMoveUsers, move.ID, u[4].ID)
		if err != nil {
			t.Fatal(err)
		}
		ev = modeltest.WantEvents(t, db, org, audit.ManagementExecutionRetried, 1)[0]
		want := fmt.Sprintf(`management_execution:%d:Move users attempt=[1,2] job_id=["%d","%d"] status=["time_out","yet_to_start"], job:%d:Move users (retry)`,
			move.ID, mjob.ID, rjob.ID, rjob.ID)
		if got := targetsOf(t, ev); got != want {
			t.Errorf("targets %s, want %s", got, want)
		}
	})
}
