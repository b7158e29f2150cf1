package management

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/listing"
	"iam/models/sqldb"
)

// The columns of an upload that identify its rows' users (spec 2.16's
// match_columns), in the order a row's values are tried.
const (
	MatchUserID       = "User ID"
	MatchPrimaryEmail = "Primary Email"
	MatchEmployeeID   = "Employee ID"
	MatchMobileNumber = "Mobile Number"
)

// MatchColumnNames are the match columns in the order they are tried.
var MatchColumnNames = []string{MatchUserID, MatchPrimaryEmail, MatchEmployeeID, MatchMobileNumber}

// Uploaded row states (spec 2.16).
const (
	RowMapped        = "MAPPED"
	RowDuplicateUser = "DUPLICATE_USER"
	RowNotFound      = "NOT_FOUND"
	RowInvalid       = "INVALID"
)

// Limits of an upload.
const (
	MaxUploadColumns  = 64
	MaxUploadCellLen  = 1024
	MaxUploadRowsSync = 5000    // rows resolved inside the request; more are resolved by a job
	MaxUploadRows     = 200_000 // rows of an upload
)

// An upload resolved inside the request is read, resolved and written a
// chunk at a time: at most UploadChunkRows records, and no more once their
// cells hold UploadChunkBytes. What one upload holds is one chunk, whatever
// the size of its file.
const (
	UploadChunkRows  = 500
	UploadChunkBytes = 2 << 20
)

// Upload states: an upload resolved inside the request is resolved at
// once; a larger one is resolving until its job has resolved every row,
// or failed when the job could not (deleted, cancelled, the file
// unreadable).
const (
	UploadResolving = "resolving"
	UploadResolved  = "resolved"
	UploadFailed    = "failed"
)

// UploadColumn is a column of an upload's header.
type UploadColumn struct {
	Name          string `json:"name"`
	IsMatchColumn bool   `json:"is_match_column"`
}

// MgmtUpload is a file uploaded to a management action, its rows resolved
// to users (spec 2.16).
type MgmtUpload struct {
	bun.BaseModel `bun:"table:mgmt_uploads"`

	ID           int64          `bun:"id,pk"`
	OrgID        int64          `bun:"org_id"`
	Action       MgmtAction     `bun:"action"`
	FileName     string         `bun:"file_name"`
	Header       []UploadColumn `bun:"header,type:json"`
	MatchColumns []string       `bun:"match_columns,type:json"`
	RowCount     int64          `bun:"row_count"`
	CreatedBy    int64          `bun:"created_by"`
	CreatedAt    time.Time      `bun:"created_at"`
	// Status is UploadResolving, UploadResolved or UploadFailed; Message
	// says why it failed.
	Status  string `bun:"status"`
	Message string `bun:"message"`
	// JobID is the job that resolves (resolved) the rows; nil when they
	// were resolved inside the request.
	JobID *int64 `bun:"job_id"`
	// FileRows is the number of data rows of the file; NextRow and
	// NextOffset where the job resolving it has got to (the next row's
	// number and byte offset in the file).
	FileRows   int64 `bun:"file_rows"`
	NextRow    int64 `bun:"next_row"`
	NextOffset int64 `bun:"next_offset"`
}

// UploadRow is a row of an upload (spec 2.16): its number (1 for the first
// row after the header), the user it names when MAPPED or DUPLICATE_USER,
// its status and why, and its cells by header name.
type UploadRow struct {
	bun.BaseModel `bun:"table:mgmt_upload_rows"`

	UploadID     int64             `bun:"upload_id,pk"`
	RowNo        int64             `bun:"row_no,pk"`
	UserID       *int64            `bun:"user_id"`
	Status       string            `bun:"status"`
	Message      string            `bun:"message"`
	ImportedData map[string]string `bun:"imported_data,type:json"`
}

// UploadRowListing is the allow-list of an upload's data: row order, offset
// paging, 200 a page (spec 4.0 for management lists).
var UploadRowListing = listing.MustSchema(listing.Schema{
	Name: "upload_rows",
	Key:  "row_no",
	Attributes: []listing.Attribute{
		{Name: "id", Column: "row_no", Type: listing.TypeInteger, Filter: true, Sort: true},
		{Name: "user_id", Column: "user_id", Type: listing.TypeID, Filter: true},
		{Name: "status", Column: "status", Type: listing.TypeString, Filter: true},
		{Name: "message", Column: "message", Type: listing.TypeString, Filter: true},
		{Name: "imported_data"},
	},
	DefaultLimit:     200,
	MaxLimit:         1000,
	Paging:           listing.OffsetPaging,
	StartIndexString: true,
})

// ErrUploadNotFound answers an upload that is not the organization's, or
// not the action's.
var ErrUploadNotFound = models.NotFound("Upload", "the upload does not exist")

// UploadHeader checks a header row and marks its match columns (names
// compared ignoring case and surrounding spaces; the header keeps the
// canonical spelling). EINVALID when a column is empty, too long or named
// twice, when there are more than MaxUploadColumns, or when no match column
// is present.
func UploadHeader(names []string) ([]UploadColumn, []string, error) {
	if len(names) > MaxUploadColumns {
		return nil, nil, models.Invalid("file", "the header has %d columns; at most %d", len(names), MaxUploadColumns)
	}
	var header []UploadColumn
	var match []string
	seen := map[string]bool{}
	for i, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, nil, models.Invalid("file", "column %d of the header has no name", i+1)
		}
		if len(n) > 256 {
			return nil, nil, models.Invalid("file", "column %d of the header is longer than 256 bytes", i+1)
		}
		col := UploadColumn{Name: n}
		for _, m := range MatchColumnNames {
			if strings.EqualFold(n, m) {
				col = UploadColumn{Name: m, IsMatchColumn: true}
				match = append(match, m)
			}
		}
		key := strings.ToLower(col.Name)
		if seen[key] {
			return nil, nil, &models.Error{Code: models.EINVALID, Field: "file", Detail: fmt.Sprintf("the header names %q twice", col.Name),
				Causes: []models.Cause{{Title: "DUPLICATE_COLUMNS", Detail: fmt.Sprintf("%q appears more than once", col.Name)}}}
		}
		seen[key] = true
		header = append(header, col)
	}
	if len(match) == 0 {
		return nil, nil, &models.Error{Code: models.EINVALID, Field: "file", Detail: "the header has no match column: name at least one of " + strings.Join(MatchColumnNames, ", "),
			Causes: []models.Cause{{Title: "NO_MATCH_COLUMN", Detail: "expected one of " + strings.Join(MatchColumnNames, ", ")}}}
	}
	return header, match, nil
}

// UploadRecord is a data row of an uploaded file: its row number, its
// cells, and what is wrong with it when the file reader could not read it
// whole (the row is then INVALID with that message).
type UploadRecord struct {
	RowNo   int64
	Fields  []string
	Problem string
}

// CreateUpload writes up (its Header and MatchColumns from UploadHeader)
// with records, as CreateUploadFrom.
func (s *MgmtStore) CreateUpload(ctx context.Context, up *MgmtUpload, records []UploadRecord) error {
	if len(records) > MaxUploadRowsSync {
		return models.Invalid("file", "has %d rows; at most %d", len(records), MaxUploadRowsSync)
	}
	return s.CreateUploadFrom(ctx, up, func() (UploadRecord, error) {
		if len(records) == 0 {
			return UploadRecord{}, io.EOF
		}
		r := records[0]
		records = records[1:]
		return r, nil
	})
}

// CreateUploadFrom writes up (its Header and MatchColumns from
// UploadHeader) with the records next returns (io.EOF after the last; a
// record without a RowNo is numbered after the one before), each resolved
// to a user of the organization:
//
//   - every non-empty match value is looked up (User ID as an id, Primary
//     Email ignoring case, Employee ID and Mobile Number as written);
//   - a row without any match value, with a malformed User ID, with a cell
//     longer than MaxUploadCellLen or with more cells than the header is
//     INVALID;
//   - a value no user has, or one several users share, is NOT_FOUND, the
//     message naming the column and value;
//   - values naming different users make the row INVALID;
//   - a row naming a user an earlier row already named is DUPLICATE_USER
//     (the first stays MAPPED); otherwise the row is MAPPED.
//
// Upload and rows are written in one transaction, the records read,
// resolved and written a chunk at a time (UploadChunkRows, UploadChunkBytes)
// so that only one chunk is held: the users earlier chunks mapped are kept
// by id, so that duplicates are found across chunks. EINVALID when there
// are no records or more than MaxUploadRowsSync; an error of next ends it.
func (s *MgmtStore) CreateUploadFrom(ctx context.Context, up *MgmtUpload, next func() (UploadRecord, error)) error {
	up.ID = sqldb.NewID()
	up.Status = UploadResolved
	up.CreatedAt = time.Now().UTC()
	var count int64
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(up).Exec(ctx); err != nil {
			return fmt.Errorf("insert upload: %w", err)
		}
		named := map[int64]int64{} // user id → the row that maps it
		earlier := func(_ context.Context, ids []int64) (map[int64]int64, error) {
			out := make(map[int64]int64)
			for _, id := range ids {
				if row, ok := named[id]; ok {
					out[id] = row
				}
			}
			return out, nil
		}
		chunk := make([]UploadRecord, 0, UploadChunkRows)
		for done := false; !done; {
			var err error
			chunk, done, err = readUploadChunk(next, chunk[:0], &count)
			if err != nil {
				return err
			}
			if len(chunk) == 0 {
				break
			}
			rows, err := resolveRows(ctx, tx, up.OrgID, up.Header, chunk, earlier)
			if err != nil {
				return err
			}
			for i := range rows {
				rows[i].UploadID = up.ID
				if rows[i].Status == RowMapped {
					named[*rows[i].UserID] = rows[i].RowNo
				}
			}
			if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
				return fmt.Errorf("insert upload rows: %w", err)
			}
		}
		if count == 0 {
			return models.Invalid("file", "has no rows after the header")
		}
		up.RowCount, up.FileRows, up.NextRow = count, count, count+1
		if _, err := tx.NewUpdate().Model(up).Column("row_count", "file_rows", "next_row").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update upload: %w", err)
		}
		return models.Record(ctx, models.AuditEvent{OrgID: up.OrgID, Type: audit.ManagementUploadCreated, Targets: []models.EventTarget{uploadTarget(up)}})
	})
	if err != nil {
		up.ID, up.RowCount, up.FileRows, up.NextRow = 0, 0, 0, 0
	}
	return err
}

// readUploadChunk appends to chunk the next records of next, up to
// UploadChunkRows and until their cells hold UploadChunkBytes, numbering
// those without a row number from *count on; done when next ended.
// EINVALID past MaxUploadRowsSync records.
func readUploadChunk(next func() (UploadRecord, error), chunk []UploadRecord, count *int64) (_ []UploadRecord, done bool, _ error) {
	size := 0
	for len(chunk) < UploadChunkRows && size < UploadChunkBytes {
		r, err := next()
		if errors.Is(err, io.EOF) {
			return chunk, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if *count++; *count > MaxUploadRowsSync {
			return nil, false, models.Invalid("file", "has more than %d rows", MaxUploadRowsSync)
		}
		if r.RowNo == 0 {
			r.RowNo = *count
		}
		for _, f := range r.Fields {
			size += len(f)
		}
		chunk = append(chunk, r)
	}
	return chunk, false, nil
}

// earlierRows returns, for users of ids, the number of the row before the
// records being resolved that already names them (MAPPED): the rows a job
// stored in earlier chunks of the same upload.
type earlierRows func(ctx context.Context, ids []int64) (map[int64]int64, error)

// resolveRows turns records into rows with their users and states: the one
// resolver of uploads, chunk by chunk inside the request and in a job
// (earlier names the users earlier chunks mapped, so that a later row
// naming one is DUPLICATE_USER however far apart they are; nil when there
// are none).
func resolveRows(ctx context.Context, db bun.IDB, orgID int64, header []UploadColumn, records []UploadRecord, earlier earlierRows) ([]UploadRow, error) {
	rows := make([]UploadRow, len(records))
	// values[column] are the normalized values to look up.
	values := map[string][]string{}
	for i, r := range records {
		rec := r.Fields
		row := &rows[i]
		row.RowNo = r.RowNo
		if row.RowNo == 0 {
			row.RowNo = int64(i + 1)
		}
		row.ImportedData = make(map[string]string, len(header))
		for j, col := range header {
			if j < len(rec) {
				row.ImportedData[col.Name] = rec[j]
			} else {
				row.ImportedData[col.Name] = ""
			}
		}
		switch {
		case r.Problem != "":
			row.Status, row.Message = RowInvalid, truncate(r.Problem, 512)
			continue
		case len(rec) > len(header):
			row.Status, row.Message = RowInvalid, fmt.Sprintf("the row has %d cells; the header has %d columns", len(rec), len(header))
			continue
		case longCell(rec) >= 0:
			row.Status, row.Message = RowInvalid, fmt.Sprintf("%s is longer than %d bytes", header[longCell(rec)].Name, MaxUploadCellLen)
			continue
		}
		any := false
		for _, col := range header {
			if !col.IsMatchColumn {
				continue
			}
			v := normalizeMatch(col.Name, row.ImportedData[col.Name])
			if v == "" {
				continue
			}
			if col.Name == MatchUserID {
				if _, err := strconv.ParseInt(v, 10, 64); err != nil {
					row.Status, row.Message = RowInvalid, fmt.Sprintf("User ID %q is not a user id (digits)", truncate(v, 64))
					break
				}
			}
			any = true
			values[col.Name] = append(values[col.Name], v)
		}
		if row.Status == "" && !any {
			row.Status, row.Message = RowInvalid, "the row has no value in a match column ("+strings.Join(matchNames(header), ", ")+")"
		}
	}
	found := map[string]map[string][]int64{}
	for col, vs := range values {
		m, err := lookupMatches(ctx, db, orgID, col, vs)
		if err != nil {
			return nil, err
		}
		found[col] = m
	}
	named := map[int64]int64{} // user id → first row naming it
	if earlier != nil {
		var ids []int64
		for _, m := range found {
			for _, us := range m {
				if len(us) == 1 {
					ids = append(ids, us[0])
				}
			}
		}
		if len(ids) > 0 {
			var err error
			if named, err = earlier(ctx, ids); err != nil {
				return nil, err
			}
			if named == nil {
				named = map[int64]int64{}
			}
		}
	}
	for i := range rows {
		row := &rows[i]
		if row.Status != "" {
			continue
		}
		var user int64
		var userCol string
	cols:
		for _, col := range MatchColumnNames {
			raw, ok := row.ImportedData[col]
			if !ok || !isMatchColumn(header, col) {
				continue
			}
			v := normalizeMatch(col, raw)
			if v == "" {
				continue
			}
			ids := found[col][v]
			switch {
			case len(ids) == 0:
				row.Status, row.Message = RowNotFound, fmt.Sprintf("no user has %s %q", col, truncate(strings.TrimSpace(raw), 128))
				break cols
			case len(ids) > 1:
				row.Status, row.Message = RowNotFound, fmt.Sprintf("%s %q matches %d users; use a column that names one user", col, truncate(strings.TrimSpace(raw), 128), len(ids))
				break cols
			case user != 0 && ids[0] != user:
				row.Status, row.Message = RowInvalid, fmt.Sprintf("%s and %s name different users", userCol, col)
				break cols
			}
			user, userCol = ids[0], col
		}
		if row.Status != "" {
			continue
		}
		id := user
		row.UserID = &id
		if first, ok := named[user]; ok {
			row.Status, row.Message = RowDuplicateUser, fmt.Sprintf("row %d already names this user", first)
			continue
		}
		named[user] = row.RowNo
		row.Status = RowMapped
	}
	return rows, nil
}

func longCell(rec []string) int {
	for j, c := range rec {
		if len(c) > MaxUploadCellLen {
			return j
		}
	}
	return -1
}

func isMatchColumn(header []UploadColumn, name string) bool {
	for _, c := range header {
		if c.Name == name {
			return c.IsMatchColumn
		}
	}
	return false
}

func matchNames(header []UploadColumn) []string {
	var out []string
	for _, c := range header {
		if c.IsMatchColumn {
			out = append(out, c.Name)
		}
	}
	return out
}

// normalizeMatch is the form of a match value that is compared: trimmed;
// emails in lower case.
func normalizeMatch(col, v string) string {
	v = strings.TrimSpace(v)
	if col == MatchPrimaryEmail {
		v = strings.ToLower(v)
	}
	return v
}

// lookupMatches returns, for each value of a match column, the ids of the
// organization's users that have it (several when a value is shared).
func lookupMatches(ctx context.Context, db bun.IDB, orgID int64, col string, values []string) (map[string][]int64, error) {
	out := map[string][]int64{}
	var expr string
	switch col {
	case MatchUserID:
		expr = "CAST(id AS TEXT)"
	case MatchPrimaryEmail:
		expr = "lower(email)"
	case MatchEmployeeID:
		expr = "employee_id"
	case MatchMobileNumber:
		expr = "mobile_number"
	default:
		return nil, fmt.Errorf("lookup matches: unknown column %q", col)
	}
	for start := 0; start < len(values); start += 500 {
		chunk := values[start:min(start+500, len(values))]
		var found []struct {
			ID    int64  `bun:"id"`
			Value string `bun:"v"`
		}
		q := db.NewSelect().Table("users").ColumnExpr("id").ColumnExpr(expr+" AS v").Where("org_id = ?", orgID)
		if col == MatchUserID {
			ids := make([]int64, 0, len(chunk))
			for _, v := range chunk {
				if id, err := strconv.ParseInt(v, 10, 64); err == nil {
					ids = append(ids, id)
				}
			}
			q = q.Where("id IN (?)", bun.List(ids))
		} else {
			q = q.Where(expr+" IN (?)", bun.List(chunk)).Where(expr + " <> ''")
		}
		if err := q.OrderExpr("id").Scan(ctx, &found); err != nil {
			return nil, fmt.Errorf("look up %s: %w", col, err)
		}
		for _, f := range found {
			out[f.Value] = append(out[f.Value], f.ID)
		}
	}
	return out, nil
}

// GetUpload returns an upload of the organization and action; it only
// reads. (An upload whose resolving job ended or was deleted before
// resolving it was failed by that write: FailUploadOfJob.) ENOTFOUND when
// it is another's.
func (s *MgmtStore) GetUpload(ctx context.Context, orgID int64, a MgmtAction, id int64) (*MgmtUpload, error) {
	return getUpload(ctx, s.db, orgID, a, id)
}

// errUploadNotResolved refuses to act on an upload whose rows are not all
// resolved.
func errUploadNotResolved(up *MgmtUpload) error {
	if up.Status == UploadFailed {
		return models.Errorf(models.ECONFLICT, "the upload could not be resolved (%s); upload the file again", up.Message)
	}
	return models.Errorf(models.ECONFLICT, "the upload is still resolving (%d of %d rows so far): wait until its status is resolved",
		up.RowCount, up.FileRows)
}

// ListUploadRows returns a page of an upload's rows. ENOTFOUND when the
// upload is not the organization's and action's.
func (s *MgmtStore) ListUploadRows(ctx context.Context, orgID int64, a MgmtAction, uploadID int64, p listing.Params) ([]UploadRow, listing.Meta, error) {
	if _, err := s.GetUpload(ctx, orgID, a, uploadID); err != nil {
		return nil, nil, err
	}
	var rows []UploadRow
	q := s.db.NewSelect().Model(&rows).Where("upload_id = ?", uploadID)
	meta, err := listing.Fetch(ctx, q, &rows, UploadRowListing, p)
	return rows, meta, err
}

// recordRowsDeleted records management.upload_data_deleted: the upload
// (its row count before and after), then the rows deleted by number.
func recordRowsDeleted(ctx context.Context, up *MgmtUpload, rowNos []int64) error {
	main := uploadTarget(up)
	main.Changes = []models.FieldChange{{Field: "row_count", Old: up.RowCount, New: up.RowCount - int64(len(rowNos))}}
	rows := make([]models.EventTarget, len(rowNos))
	for i, n := range rowNos {
		rows[i] = models.EventTarget{Type: UploadRowTargetType, ID: strconv.FormatInt(n, 10), DisplayName: "row " + strconv.FormatInt(n, 10)}
	}
	return recordBulk(ctx, up.OrgID, audit.ManagementUploadDataDeleted, main, rows)
}

// MaxUploadRowIDs is the most row ids one delete names.
const MaxUploadRowIDs = 1000

// DeleteUploadRows removes rows of an upload: those of rowNos, or those
// matching filter (UploadRowListing's filter language), or both (a row
// must then satisfy both); at least one is required. It returns, for each
// id of rowNos in order, whether it existed and was removed, and the number
// of rows removed in all. The upload's row count follows. ENOTFOUND when
// the upload is not the organization's and action's; EINVALID for a bad
// filter or neither selector; ECONFLICT while it is resolving, or when it
// failed.
func (s *MgmtStore) DeleteUploadRows(ctx context.Context, orgID int64, a MgmtAction, uploadID int64, rowNos []int64, filter string) (removed []bool, total int64, err error) {
	if len(rowNos) == 0 && filter == "" {
		return nil, 0, models.Invalid("ids", "name the rows to delete by ids or filter")
	}
	if len(rowNos) > MaxUploadRowIDs {
		return nil, 0, models.Invalid("ids", "names %d rows; at most %d", len(rowNos), MaxUploadRowIDs)
	}
	var where string
	var args []any
	if filter != "" {
		var expr listing.Expr
		if expr, err = listing.ParseFilter(filter); err != nil {
			return nil, 0, models.Invalid("filter", "%v", err)
		}
		where, args, err = UploadRowListing.Where(s.db.Dialect().Name(), expr)
		if err != nil {
			return nil, 0, models.Invalid("filter", "%v", err)
		}
	}
	if err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		up := new(MgmtUpload)
		q := tx.NewSelect().Model(up).Where("org_id = ? AND action = ? AND id = ?", orgID, a, uploadID)
		if err := s.d.LockRows(q, "NO KEY UPDATE").Scan(ctx); errors.Is(err, sql.ErrNoRows) {
			return ErrUploadNotFound
		} else if err != nil {
			return fmt.Errorf("select upload: %w", err)
		}
		if up.Status != UploadResolved {
			return errUploadNotResolved(up)
		}
		del := tx.NewDelete().Model((*UploadRow)(nil)).Where("upload_id = ?", uploadID)
		if len(rowNos) > 0 {
			del = del.Where("row_no IN (?)", bun.List(rowNos))
		}
		if where != "" {
			del = del.Where(where, args...)
		}
		var gone []int64
		if err := del.Returning("row_no").Scan(ctx, &gone); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delete upload rows: %w", err)
		}
		slices.Sort(gone)
		set := make(map[int64]bool, len(gone))
		for _, n := range gone {
			set[n] = true
		}
		removed = make([]bool, len(rowNos))
		for i, n := range rowNos {
			removed[i] = set[n]
		}
		total = int64(len(gone))
		if total == 0 {
			return nil
		}
		if _, err := tx.NewUpdate().Model((*MgmtUpload)(nil)).Set("row_count = row_count - ?", total).
			Where("id = ?", uploadID).Exec(ctx); err != nil {
			return fmt.Errorf("update upload: %w", err)
		}
		return recordRowsDeleted(ctx, up, gone)
	}); err != nil {
		return nil, 0, err
	}
	return removed, total, nil
}
