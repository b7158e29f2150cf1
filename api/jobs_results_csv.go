package api

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/jobs"
	"iam/models/management"
)

// With Accept: text/csv, GET /jobs/{job_id}/results and a management
// execution's data answer every result as one CSV file, streamed: pages of
// csvPage rows read by keyset (seq above the last one sent), each its own
// query, so no transaction stays open while the client reads, and memory
// stays the same whatever the job's size. Filters and paging parameters are
// ignored: the file holds every result.
//
// Columns of a job's results: row, id, status, message; and email (the
// user's primary email, read when the file is made; empty when the row
// matched no user or the user was deleted) for jobs whose entity is a user
// (quick enrollment, management executions); for a job resolving a
// management upload, the upload's match columns (Primary Email, ...) with
// each row's value as the file gave it. Columns of an execution's data:
// row, id, email, first_name, last_name, status, message.
//
// Cells are neutralised against CSV injection (OWASP): a text cell that
// begins with =, +, -, @, a tab or a carriage return is written with a
// single quote before it, so a spreadsheet shows it as text instead of
// running it as a formula ("-5" becomes "'-5").

// csvType is the media type of the CSV exports.
const csvType = "text/csv"

// csvPage is how many results each query of an export reads.
const csvPage = 1000

// wantsCSV reports whether the request asks for the CSV export.
func wantsCSV(c *gin.Context) bool {
	return strings.Contains(c.GetHeader("Accept"), csvType)
}

// csvCell neutralises a text cell against CSV injection.
func csvCell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// csvStream writes a CSV export: the header, then rows as the caller
// writes them, flushed every page with a write deadline of its own.
type csvStream struct {
	c   *gin.Context
	buf *bufio.Writer
	w   *csv.Writer
	rc  *http.ResponseController
}

func startCSV(c *gin.Context, filename string, header []string) (*csvStream, error) {
	c.Header("Content-Type", csvType+"; charset=utf-8")
	c.Header("Content-Disposition", `attachment; filename="`+filename+`"`)
	c.Header("Cache-Control", "no-store")
	c.Status(http.StatusOK)
	buf := bufio.NewWriterSize(c.Writer, 32<<10)
	s := &csvStream{c: c, buf: buf, w: csv.NewWriter(buf), rc: http.NewResponseController(c.Writer)}
	return s, s.w.Write(header)
}

// row writes one record, neutralising each cell.
func (s *csvStream) row(cells ...string) error {
	for i := range cells {
		cells[i] = csvCell(cells[i])
	}
	return s.w.Write(cells)
}

func (s *csvStream) flush() error {
	s.w.Flush()
	if err := s.w.Error(); err != nil {
		return err
	}
	if err := s.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := s.buf.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// end finishes the export; an error after the header was sent can only
// cut the file short (logged; the client sees the connection end).
func (s *csvStream) end(err error) error {
	if err == nil {
		err = s.flush()
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			logger(s.c).Warn("CSV export ended early", "error", err)
		}
		s.c.Abort()
	}
	return nil
}

// jobResultsCSV: GET /jobs/{job_id}/results with Accept: text/csv.
func (s *Server) jobResultsCSV(c *gin.Context, jobID int64) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	job, err := s.store.Jobs.Get(ctx, org, jobID)
	if err != nil {
		return err
	}
	users := strings.EqualFold(job.Entity, "user")
	header := []string{"row", "id", "status", "message"}
	if users {
		header = append(header, "email")
	}
	upload, err := s.resolvedUpload(ctx, job)
	if err != nil {
		return err
	}
	if upload != nil {
		header = append(header, upload.MatchColumns...)
	}
	out, err := startCSV(c, "job-"+models.FormatID(job.ID)+"-results.csv", header)
	if err != nil {
		return out.end(err)
	}
	after := int64(0)
	for {
		page, err := s.store.Jobs.ResultsAfter(ctx, job.ID, after, csvPage)
		if err != nil {
			return out.end(err)
		}
		var emails map[int64]string
		if users {
			if emails, err = s.userEmails(ctx, org, page); err != nil {
				return out.end(err)
			}
		}
		var matched map[int64]map[string]string
		if upload != nil && len(page) > 0 {
			if matched, err = s.uploadRowValues(ctx, upload.ID, page); err != nil {
				return out.end(err)
			}
		}
		for i := range page {
			r := &page[i]
			cells := []string{strconv.FormatInt(r.Seq, 10), r.EntityID, r.Status, r.Message}
			if users {
				uid, _ := strconv.ParseInt(r.EntityID, 10, 64)
				cells = append(cells, emails[uid])
			}
			if upload != nil {
				for _, col := range upload.MatchColumns {
					cells = append(cells, matched[r.Seq][col])
				}
			}
			if err := out.row(cells...); err != nil {
				return out.end(err)
			}
		}
		if len(page) < csvPage {
			return out.end(nil)
		}
		after = page[len(page)-1].Seq
		if err := out.flush(); err != nil {
			return out.end(err)
		}
	}
}

// resolvedUpload returns the management upload a resolving job reads
// (its rows carry the file's match columns), or nil for every other kind
// of job and for an upload since deleted.
func (s *Server) resolvedUpload(ctx context.Context, job *jobs.Job) (*management.MgmtUpload, error) {
	if job.Kind != jobs.MgmtResolveJobKind {
		return nil, nil
	}
	var in management.UploadResolveInput
	if err := json.Unmarshal(job.Input, &in); err != nil || in.UploadID == 0 {
		return nil, nil //nolint:nilerr // an input without its upload: the file has no match columns to show
	}
	up, err := s.store.Management.UploadByJob(ctx, job.OrgID, in.UploadID)
	if models.ErrorCode(err) == models.ENOTFOUND {
		return nil, nil
	}
	return up, err
}

// uploadRowValues returns the imported values of the upload rows a page of
// a resolving job's results names (seq is the row number), by row.
func (s *Server) uploadRowValues(ctx context.Context, uploadID int64, page []jobs.JobResult) (map[int64]map[string]string, error) {
	rows, err := s.store.Management.UploadRows(ctx, uploadID, page[0].Seq, page[len(page)-1].Seq+1)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]map[string]string, len(rows))
	for i := range rows {
		out[rows[i].RowNo] = rows[i].ImportedData
	}
	return out, nil
}

// userEmails returns the primary email of the organization's users that a
// page of results names, by id.
func (s *Server) userEmails(ctx context.Context, org int64, page []jobs.JobResult) (map[int64]string, error) {
	ids := make([]int64, 0, len(page))
	for i := range page {
		if id, err := strconv.ParseInt(page[i].EntityID, 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	users, err := s.store.Users.ByIDs(ctx, org, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(users))
	for id, u := range users {
		out[id] = u.Email
	}
	return out, nil
}

// mgmtExecutionCSV: GET …/executions/{execution_id}/data with Accept:
// text/csv, every result of the attempt.
func (s *Server) mgmtExecutionCSV(c *gin.Context, a management.MgmtAction, execID int64, attempt int) error {
	ctx := c.Request.Context()
	attempt, err := s.store.Management.ExecutionAttempt(ctx, principal(c).OrgID, a, execID, attempt)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("execution-%s-attempt-%d-results.csv", models.FormatID(execID), attempt)
	out, err := startCSV(c, name, []string{"row", "id", "email", "first_name", "last_name", "status", "message"})
	if err != nil {
		return out.end(err)
	}
	after := int64(0)
	for {
		page, err := s.store.Management.ResultsAfter(ctx, execID, attempt, after, csvPage)
		if err != nil {
			return out.end(err)
		}
		for i := range page {
			r := &page[i]
			if err := out.row(strconv.FormatInt(r.Seq, 10), models.FormatID(r.UserID), r.Email, r.FirstName, r.LastName, r.Status, r.Message); err != nil {
				return out.end(err)
			}
		}
		if len(page) < csvPage {
			return out.end(nil)
		}
		after = page[len(page)-1].Seq
		if err := out.flush(); err != nil {
			return out.end(err)
		}
	}
}
