package management_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/management"
)

// The rows of TestMgmtStore_Upload's file: every state, a duplicate of row
// 1 in row 3 and of row 2 in row 11.
func resolveFixtureRows(u []*identity.User) [][]string {
	return [][]string{
		{"user0@example.com", "", "", "", "a"},
		{"", "E1", "", "", "b"},
		{"", "", "", models.FormatID(u[0].ID), "c"},
		{"nobody@example.com", "", "", "", "d"},
		{"", "", "+49 555", "", "e"},
		{"", "", "", "", "f"},
		{"", "", "", "12ab", "g"},
		{"user2@example.com", "E1", "", "", "h"},
		{"user2@example.com", "E2", "", "", "i", "extra"},
		{" user2@example.com ", "E2", "", models.FormatID(u[2].ID)},
		{"USER1@example.com", "", "", "", "k"},
	}
}

// A large upload resolved chunk by chunk (here three rows a chunk) gets
// exactly the rows the request's path gives the same file: the one
// resolver, with users mapped by earlier chunks making later rows
// DUPLICATE_USER. Until its last chunk the upload is resolving: it cannot
// be executed nor have rows removed (ECONFLICT); a chunk written twice
// changes nothing; one past the cursor is refused.
func TestMgmtStore_ResolveUploadInChunks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		names := []string{"Primary Email", "Employee ID", "Mobile Number", "User ID", "Note"}
		rows := resolveFixtureRows(f.users)
		inRequest := f.upload(t, management.ActionDeleteUsers, names, rows)

		header, match, _ := management.UploadHeader(names)
		up := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionDeleteUsers, FileName: "big.csv", Header: header,
			MatchColumns: match, FileRows: int64(len(rows))}
		file := jobs.FileUpload{Name: "big.csv", ContentType: "text/csv", Body: strings.NewReader("the file"), MaxSize: 1 << 20}
		job, err := f.store.Management.CreateResolvingUpload(ctx, up, file, "UTF-8", 42)
		if err != nil {
			t.Fatal(err)
		}
		if job.Kind != jobs.MgmtResolveJobKind || job.Module != management.MgmtModule || job.Total != int64(len(rows)) {
			t.Errorf("job %+v", job)
		}
		got, err := m.GetUpload(ctx, f.org.ID, management.ActionDeleteUsers, up.ID)
		if err != nil || got.Status != management.UploadResolving || got.JobID == nil || *got.JobID != job.ID ||
			got.NextRow != 1 || got.NextOffset != 42 || got.RowCount != 0 || got.FileRows != int64(len(rows)) {
			t.Fatalf("GetUpload = %+v, %v", got, err)
		}

		recs := records(rows)
		for i := range recs {
			recs[i].RowNo = int64(i + 1)
		}
		for from := 0; from < len(recs); from += 3 {
			to := min(from+3, len(recs))
			done := to == len(recs)
			if from > 0 {
				_, _, err = m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers,
					Selection: management.Selection{UploadID: up.ID}})
				if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "still resolving") {
					t.Errorf("execute while resolving = %v, want ECONFLICT", err)
				}
				if _, _, err = m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, []int64{1}, ""); models.ErrorCode(err) != models.ECONFLICT {
					t.Errorf("delete rows while resolving = %v, want ECONFLICT", err)
				}
				if _, err = m.ResolveUploadChunk(ctx, f.org.ID, up.ID, int64(from+2), recs[from:to], int64(100+to), done); models.ErrorCode(err) != models.ECONFLICT {
					t.Errorf("a chunk past the cursor = %v, want ECONFLICT", err)
				}
			}
			for range 2 { // the second: a retry after the commit
				res, resolveErr := m.ResolveUploadChunk(ctx, f.org.ID, up.ID, int64(from+1), recs[from:to], int64(100+to), done)
				if resolveErr != nil {
					t.Fatal(resolveErr)
				}
				if len(res.Rows) != to-from || res.NextRow != int64(to+1) || res.Done != done {
					t.Fatalf("chunk from %d = %+v", from+1, res)
				}
			}
		}
		got, err = m.GetUpload(ctx, f.org.ID, management.ActionDeleteUsers, up.ID)
		if err != nil || got.Status != management.UploadResolved || got.RowCount != int64(len(rows)) || got.NextOffset != int64(100+len(rows)) {
			t.Fatalf("after the last chunk = %+v, %v", got, err)
		}
		want := listUploadRows(t, m, f.org.ID, inRequest.ID, "")
		have := listUploadRows(t, m, f.org.ID, up.ID, "")
		if len(have) != len(want) {
			t.Fatalf("%d rows, want %d", len(have), len(want))
		}
		for i := range want {
			w, h := want[i], have[i]
			if h.RowNo != w.RowNo || h.Status != w.Status || h.Message != w.Message || fmt.Sprint(deref(h.UserID)) != fmt.Sprint(deref(w.UserID)) ||
				fmt.Sprint(h.ImportedData) != fmt.Sprint(w.ImportedData) {
				t.Errorf("row %d = %+v, the request's path gives %+v", i+1, h, w)
			}
		}
		if have[2].Status != management.RowDuplicateUser || !strings.Contains(have[2].Message, "row 1") ||
			have[10].Status != management.RowDuplicateUser || !strings.Contains(have[10].Message, "row 2") {
			t.Errorf("duplicates across chunks: %+v / %+v", have[2], have[10])
		}
		exec, _, err := m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionDeleteUsers,
			Selection: management.Selection{UploadID: up.ID}})
		if err != nil || exec.Total != 3 {
			t.Errorf("execute the resolved upload = %+v, %v; want its 3 MAPPED rows", exec, err)
		}
	})
}

// An upload whose resolving job is deleted is failed by the delete itself
// (stored failed before anything reads it); it cannot be executed
// (ECONFLICT saying why), and a late chunk is refused. One whose job ends
// before resolving it is failed by the finish, saying how the job ended.
func TestMgmtStore_ResolvingUploadFailsWithItsJob(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		header, match, _ := management.UploadHeader([]string{"Primary Email"})
		up := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, FileName: "big.csv", Header: header,
			MatchColumns: match, FileRows: 2}
		job, err := f.store.Management.CreateResolvingUpload(ctx, up, jobs.FileUpload{Name: "big.csv", Body: strings.NewReader("x")}, "UTF-8", 14)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = m.ResolveUploadChunk(ctx, f.org.ID, up.ID, 1, records([][]string{{"user0@example.com"}}), 30, false); err != nil {
			t.Fatal(err)
		}
		if err = f.store.Jobs.Delete(ctx, f.org.ID, job.ID); err != nil {
			t.Fatal(err)
		}
		if status, message := storedUpload(t, db, up.ID); status != management.UploadFailed || !strings.Contains(message, "deleted") {
			t.Fatalf("after the job's delete the upload is stored %s (%q); want failed", status, message)
		}
		got, err := m.GetUpload(ctx, f.org.ID, management.ActionMoveUsers, up.ID)
		if err != nil || got.Status != management.UploadFailed || !strings.Contains(got.Message, "deleted") || got.RowCount != 1 {
			t.Fatalf("GetUpload = %+v, %v; want failed", got, err)
		}
		_, _, err = m.CreateExecution(ctx, management.NewExecution{OrgID: f.org.ID, Action: management.ActionMoveUsers,
			Selection: management.Selection{UploadID: up.ID}, TargetContainer: "OU=X"})
		if models.ErrorCode(err) != models.ECONFLICT || !strings.Contains(err.Error(), "could not be resolved") {
			t.Errorf("execute a failed upload = %v", err)
		}
		if _, err = m.ResolveUploadChunk(ctx, f.org.ID, up.ID, 2, records([][]string{{"user1@example.com"}}), 50, true); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("a chunk of a failed upload = %v, want ECONFLICT", err)
		}
		if _, err = f.store.Management.CreateResolvingUpload(ctx, &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, Header: header,
			MatchColumns: match, FileRows: management.MaxUploadRows + 1}, jobs.FileUpload{Body: strings.NewReader("x")}, "UTF-8", 0); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("%d rows = %v, want EINVALID", management.MaxUploadRows+1, err)
		}

		// A job that ends without resolving its upload fails it as it ends;
		// ending another job leaves a resolving upload alone.
		ended := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, FileName: "big.csv", Header: header,
			MatchColumns: match, FileRows: 2}
		endedJob, err := f.store.Management.CreateResolvingUpload(ctx, ended, jobs.FileUpload{Name: "big.csv", Body: strings.NewReader("x")}, "UTF-8", 14)
		if err != nil {
			t.Fatal(err)
		}
		other := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, FileName: "other.csv", Header: header,
			MatchColumns: match, FileRows: 2}
		if _, err := f.store.Management.CreateResolvingUpload(ctx, other, jobs.FileUpload{Name: "other.csv", Body: strings.NewReader("x")}, "UTF-8", 14); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Jobs.Start(ctx, f.org.ID, endedJob.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.store.Jobs.Finish(ctx, f.org.ID, endedJob.ID, jobs.JobError, "the file is gone", jobs.JobProgress{}); err != nil {
			t.Fatal(err)
		}
		if status, message := storedUpload(t, db, ended.ID); status != management.UploadFailed || message != "the job resolving the upload ended ERROR: the file is gone" {
			t.Errorf("after its job ended the upload is stored %s (%q); want failed, saying how the job ended", status, message)
		}
		if status, _ := storedUpload(t, db, other.ID); status != management.UploadResolving {
			t.Errorf("another job's end left the other upload %s, want resolving", status)
		}
		if got, err := m.GetUpload(ctx, f.org.ID, management.ActionMoveUsers, other.ID); err != nil || got.Status != management.UploadResolving {
			t.Errorf("GetUpload of the other = %+v, %v", got, err)
		}
	})
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// storedUpload reads an upload's status and message straight from its row,
// not through the store, to see what the writes left.
func storedUpload(t *testing.T, db *bun.DB, id int64) (status, message string) {
	t.Helper()
	if err := db.NewSelect().Table("mgmt_uploads").Column("status", "message").Where("id = ?", id).
		Scan(t.Context(), &status, &message); err != nil {
		t.Fatal(err)
	}
	return status, message
}
