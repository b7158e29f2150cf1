package management_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/management"
)

// uploadRowsWritten counts the rows inserted into mgmt_upload_rows.
type uploadRowsWritten struct{ rows atomic.Int64 }

func (h *uploadRowsWritten) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (h *uploadRowsWritten) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if e.Err != nil || e.Result == nil || !strings.HasPrefix(e.Query, `INSERT INTO "mgmt_upload_rows"`) {
		return
	}
	if n, err := e.Result.RowsAffected(); err == nil {
		h.rows.Add(n)
	}
}

// An upload resolved inside the request holds one chunk of its records at
// a time, bounded in rows and in bytes: each chunk is resolved and written
// before the next record is read, so what an upload holds does not grow
// with its file. Duplicates are still found across chunks, and the rows
// numbered through the whole file.
func TestMgmtStore_UploadHoldsOneChunk(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		written := &uploadRowsWritten{}
		db = db.WithQueryHook(written)
		f := newMgmtFixture(t, db)
		ctx := t.Context()
		for _, c := range []struct {
			name  string
			rows  int
			cells int // filler cells of MaxUploadCellLen bytes
		}{
			{"small rows (the row bound)", 3*management.UploadChunkRows + 7, 0},
			{"wide rows (the byte bound)", 3 * management.UploadChunkBytes / (8 * management.MaxUploadCellLen), 8},
		} {
			t.Run(c.name, func(t *testing.T) {
				names := []string{"Primary Email"}
				filler := make([]string, c.cells)
				for i := range filler {
					names = append(names, fmt.Sprintf("Column %d", i+2))
					filler[i] = strings.Repeat(string(rune('a'+i)), management.MaxUploadCellLen)
				}
				header, match, err := management.UploadHeader(names)
				if err != nil {
					t.Fatal(err)
				}
				up := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionDeleteUsers, FileName: "wide.csv", Header: header, MatchColumns: match}
				base := written.rows.Load()
				read, rowBytes := 0, 0
				var mostRows, mostBytes int
				next := func() (management.UploadRecord, error) {
					held := read - int(written.rows.Load()-base) // read, not yet written
					mostRows, mostBytes = max(mostRows, held), max(mostBytes, held*rowBytes)
					if read == c.rows {
						return management.UploadRecord{}, io.EOF
					}
					read++
					fields := append([]string{f.users[read%len(f.users)].Email}, filler...)
					rowBytes = 0
					for _, v := range fields {
						rowBytes += len(v)
					}
					return management.UploadRecord{Fields: fields}, nil
				}
				if err := f.store.Management.CreateUploadFrom(ctx, up, next); err != nil {
					t.Fatal(err)
				}
				if mostRows > management.UploadChunkRows || mostBytes > management.UploadChunkBytes+rowBytes {
					t.Errorf("held up to %d records (%d bytes) read and not written; at most %d records of %d bytes (and one more record)",
						mostRows, mostBytes, management.UploadChunkRows, management.UploadChunkBytes)
				}
				if got := written.rows.Load() - base; up.RowCount != int64(c.rows) || got != int64(c.rows) {
					t.Errorf("row_count %d, %d rows written; want %d", up.RowCount, got, c.rows)
				}
				last := listUploadRows(t, f.store.Management, f.org.ID, up.ID, fmt.Sprintf("id eq %d", c.rows))
				first := c.rows % len(f.users)
				if first == 0 {
					first = len(f.users)
				}
				want := fmt.Sprintf("row %d already names this user", first)
				if len(last) != 1 || last[0].Status != management.RowDuplicateUser || last[0].Message != want {
					t.Errorf("last row = %+v; want DUPLICATE_USER %q", last, want)
				}
			})
		}
	})
}
