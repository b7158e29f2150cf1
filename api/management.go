package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/csvimport"
	"iam/models/jobs"
	"iam/models/listing"
	"iam/models/management"
)

// mgmtPath is the prefix of the management action routes (spec 4.5).
const mgmtPath = "/management/actions/:action_id"

// mgmtUploadMaxBytes caps a management upload: models.MaxUploadRows rows
// of a few match values fit in it.
const mgmtUploadMaxBytes = 32 << 20

// DefaultMgmtUploadConcurrency is how many management uploads a process
// resolves at once when Config sets none (IAM_MGMT_UPLOAD_CONCURRENCY).
const DefaultMgmtUploadConcurrency = 2

// mgmtUploadRetryAfter is the Retry-After, in seconds, of an upload refused
// because the process resolves as many as it may: about what resolving a
// 5,000-row file takes.
const mgmtUploadRetryAfter = 2

// mgmtUploadHook, when set (tests), runs while an upload holds its slot.
var mgmtUploadHook atomic.Pointer[func()]

// mgmtUploadSlot takes one of the process's slots for resolving an upload,
// and returns its release; with every slot taken, 429 with Retry-After.
func (s *Server) mgmtUploadSlot() (release func(), err error) {
	select {
	case s.mgmtUploads <- struct{}{}:
		return func() { <-s.mgmtUploads }, nil
	default:
		ae := newAPIError(http.StatusTooManyRequests, CodeRateLimited, "Too Many Requests",
			fmt.Sprintf("the server is resolving as many uploads as it resolves at once (%d); send the file again after Retry-After seconds", cap(s.mgmtUploads)))
		ae.RetryAfter = mgmtUploadRetryAfter
		return nil, ae
	}
}

// mgmtAction reads the action of the path: an unknown one is 404.
func mgmtAction(c *gin.Context) (management.MgmtAction, error) {
	a, ok := management.ParseMgmtAction(c.Param("action_id"))
	if !ok {
		return "", management.ErrMgmtActionNotFound
	}
	return a, nil
}

// mgmtActionID reads the action and the id in path parameter param (an
// upload's or an execution's): an unknown action is 404, and so is an id
// that is not one (notFound).
func mgmtActionID(c *gin.Context, param string, notFound error) (management.MgmtAction, int64, error) {
	a, err := mgmtAction(c)
	if err != nil {
		return "", 0, err
	}
	id, err := pathID(c, param, notFound)
	if err != nil {
		return "", 0, err
	}
	return a, id, nil
}

// mgmtEntity is a user as an action's data shows it (spec 2.16), with the
// organization's view columns' values (the service's addition).
type mgmtEntity struct {
	ID         string         `json:"id"`
	FirstName  string         `json:"first_name"`
	LastName   string         `json:"last_name"`
	Email      string         `json:"email"`
	IsSelected bool           `json:"$is_selected"`
	Columns    map[string]any `json:"columns"`
}

// mgmtData: GET …/data, the users the action applies to, offset paging,
// filter over user attributes; upload_id names the selection $is_selected
// reports (default the action's latest upload).
func (s *Server) mgmtData(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	a, err := mgmtAction(c)
	if err != nil {
		return err
	}
	q := c.Request.URL.Query()
	var uploadID int64
	if v := q.Get("upload_id"); v != "" {
		if uploadID, err = models.ParseID("upload_id", v); err != nil {
			return asParamError(err)
		}
	}
	params, err := listing.Parse(q, management.MgmtDataListing)
	if err != nil {
		return err
	}
	columns, err := s.store.Management.ViewColumns(ctx, org, a)
	if err != nil {
		return err
	}
	users, meta, err := s.store.Management.ListData(ctx, org, params)
	if err != nil {
		return err
	}
	ids := make([]int64, len(users))
	for i := range users {
		ids[i] = users[i].ID
	}
	selected, err := s.store.Management.SelectedUsers(ctx, org, a, uploadID, ids)
	if err != nil {
		return err
	}
	out := make([]mgmtEntity, len(users))
	for i := range users {
		u := &users[i]
		all := map[string]any{}
		raw, _ := json.Marshal(newUserView(u))
		_ = json.Unmarshal(raw, &all)
		cols := make(map[string]any, len(columns))
		for _, name := range columns {
			cols[name] = all[name]
		}
		out[i] = mgmtEntity{ID: models.FormatID(u.ID), FirstName: u.FirstName, LastName: u.LastName, Email: u.Email,
			IsSelected: selected[u.ID], Columns: cols}
	}
	c.JSON(http.StatusOK, gin.H{"data": out, "meta": meta})
	return nil
}

// getViewColumns: GET …/view-columns.
func (s *Server) getViewColumns(c *gin.Context) error {
	a, err := mgmtAction(c)
	if err != nil {
		return err
	}
	cols, err := s.store.Management.ViewColumns(c.Request.Context(), principal(c).OrgID, a)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": cols})
	return nil
}

// putViewColumns: PUT …/view-columns, a JSON array of column names that
// replaces the organization's columns for the action.
func (s *Server) putViewColumns(c *gin.Context) error {
	a, err := mgmtAction(c)
	if err != nil {
		return err
	}
	var cols []string
	if err = decodeJSON(c, &cols); err != nil {
		return err
	}
	cols, err = s.store.Management.SetViewColumns(c.Request.Context(), principal(c).OrgID, a, cols)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": cols})
	return nil
}

// uploadView is an upload as the API shows it (spec 2.16); id is an
// integer as the spec types it.
type uploadView struct {
	ID           int64                     `json:"id"`
	Header       []management.UploadColumn `json:"header"`
	MatchColumns []string                  `json:"match_columns"`
	FileName     string                    `json:"file_name"`
	RowCount     int64                     `json:"row_count"`
	CreatedAt    time.Time                 `json:"created_at"`
	// The service's additions: the state (resolving, resolved, failed),
	// the rows of the file, the job resolving them and why it failed.
	Status    string `json:"status"`
	TotalRows int64  `json:"total_rows"`
	JobID     string `json:"job_id,omitempty"`
	Message   string `json:"message,omitempty"`
}

func newUploadView(u *management.MgmtUpload) uploadView {
	v := uploadView{ID: u.ID, Header: u.Header, MatchColumns: u.MatchColumns, FileName: u.FileName,
		RowCount: u.RowCount, CreatedAt: u.CreatedAt.UTC(), Status: u.Status, TotalRows: u.FileRows, Message: u.Message}
	if u.JobID != nil {
		v.JobID = models.FormatID(*u.JobID)
	}
	return v
}

// uploadRowView is an uploaded row (spec 2.16).
type uploadRowView struct {
	ID           string            `json:"id"`
	UserID       string            `json:"user_id"`
	Status       string            `json:"status"`
	Message      string            `json:"message"`
	ImportedData map[string]string `json:"imported_data"`
}

// mgmtUpload: POST …/uploads, a multipart form with a CSV file (and
// file_encoding, the encodings of quick enrollment; parts in any order).
// The form is read whole and spooled first, and its header checked; then
// the upload takes one of the process's slots (429 when none is free) and
// its rows are counted, keeping nothing. Up to models.MaxUploadRowsSync rows are read again and
// resolved in the request, a chunk at a time, and the upload stored in one
// transaction (201, resolved); a larger file (up to models.MaxUploadRows
// rows) is stored sealed with the upload (resolving) and the job that
// resolves its rows, started after the commit (202).
func (s *Server) mgmtUpload(c *gin.Context) error {
	a, err := mgmtAction(c)
	if err != nil {
		return err
	}
	p := principal(c)
	form, err := readUploadForm(c, mgmtUploadMaxBytes, s.cfg.UploadIdleTimeout)
	if err != nil {
		return err
	}
	defer form.Close()
	enc, err := form.encoding()
	if err != nil {
		return err
	}
	sample := make([]byte, min(form.fileSize, csvimport.SampleSize))
	if _, err = form.file.ReadAt(sample, 0); err != nil {
		return fmt.Errorf("read spooled upload: %w", err)
	}
	ins, problems := csvimport.Inspect(sample, form.fileSize <= csvimport.SampleSize, enc)
	if len(problems) > 0 {
		causes := make([]models.Cause, len(problems))
		for i, pr := range problems {
			causes[i] = models.Cause{Title: pr.Title, Detail: pr.Detail}
		}
		return csvUploadFailed(causes)
	}
	header, match, err := management.UploadHeader(ins.Header)
	if err != nil {
		var me *models.Error
		if errors.As(err, &me) && len(me.Causes) > 0 {
			return csvUploadFailed(me.Causes)
		}
		return err
	}
	// Reading the rows takes one of the process's slots.
	release, err := s.mgmtUploadSlot()
	if err != nil {
		return err
	}
	defer release()
	if hook := mgmtUploadHook.Load(); hook != nil {
		(*hook)()
	}
	if _, err = form.file.Seek(ins.DataOffset, io.SeekStart); err != nil {
		return fmt.Errorf("rewind upload: %w", err)
	}
	rows, err := countUploadRows(csvimport.NewReader(form.file, ins.Encoding, ins.DataOffset, 1))
	if err != nil {
		return err
	}
	up := &management.MgmtUpload{OrgID: p.OrgID, Action: a, FileName: truncateName(form.fileName), Header: header,
		MatchColumns: match, CreatedBy: p.UserID}
	if rows <= management.MaxUploadRowsSync {
		// Read again, and resolved a chunk at a time: one chunk is held.
		if _, err = form.file.Seek(ins.DataOffset, io.SeekStart); err != nil {
			return fmt.Errorf("rewind upload: %w", err)
		}
		r := csvimport.NewReader(form.file, ins.Encoding, ins.DataOffset, 1)
		if err = s.store.Management.CreateUploadFrom(c.Request.Context(), up, func() (management.UploadRecord, error) {
			return uploadRecord(r)
		}); err != nil {
			return uploadWriteError(c, err)
		}
		c.JSON(http.StatusCreated, gin.H{"data": newUploadView(up)})
		return nil
	}
	if _, err = form.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind upload: %w", err)
	}
	up.FileRows = rows
	file := jobs.FileUpload{Name: form.fileName, ContentType: "text/csv", Body: form.file, MaxSize: mgmtUploadMaxBytes}
	job, err := s.store.Management.CreateResolvingUpload(c.Request.Context(), up, file, ins.Encoding.Name, ins.DataOffset)
	if err != nil {
		return uploadWriteError(c, err)
	}
	s.startJob(c, job)
	c.Header("Location", "/api/v1/management/actions/"+string(a)+"/uploads/"+models.FormatID(up.ID))
	c.JSON(http.StatusAccepted, gin.H{"data": newUploadView(up)})
	return nil
}

// countUploadRows reads an upload's rows to the end and counts them,
// keeping none. EINVALID past models.MaxUploadRows.
func countUploadRows(r *csvimport.Reader) (int64, error) {
	var rows int64
	for {
		_, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read upload: %w", err)
		}
		if rows++; rows > management.MaxUploadRows {
			return 0, models.Invalid("file", "has more than %d rows", management.MaxUploadRows)
		}
	}
}

// uploadRecord reads an upload's next row (io.EOF after the last); a row
// the reader could not read whole carries its problem.
func uploadRecord(r *csvimport.Reader) (management.UploadRecord, error) {
	rec, err := r.Read()
	if errors.Is(err, io.EOF) {
		return management.UploadRecord{}, io.EOF
	}
	if err != nil {
		return management.UploadRecord{}, fmt.Errorf("read upload: %w", err)
	}
	ur := management.UploadRecord{RowNo: rec.Row, Fields: rec.Fields}
	if rec.Err != nil {
		ur.Problem = rec.Err.Error()
	}
	return ur, nil
}

func truncateName(s string) string {
	if len(s) > 255 {
		s = s[:255]
	}
	return strings.ToValidUTF8(s, "")
}

// mgmtGetUpload: GET …/uploads/{upload_id}.
func (s *Server) mgmtGetUpload(c *gin.Context) error {
	a, id, err := mgmtActionID(c, "upload_id", management.ErrUploadNotFound)
	if err != nil {
		return err
	}
	up, err := s.store.Management.GetUpload(c.Request.Context(), principal(c).OrgID, a, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newUploadView(up)})
	return nil
}

// mgmtUploadData: GET …/uploads/{upload_id}/data (offset paging, filter
// on id, user_id, status, message).
func (s *Server) mgmtUploadData(c *gin.Context) error {
	a, id, err := mgmtActionID(c, "upload_id", management.ErrUploadNotFound)
	if err != nil {
		return err
	}
	params, err := listing.Parse(c.Request.URL.Query(), management.UploadRowListing)
	if err != nil {
		return err
	}
	rows, meta, err := s.store.Management.ListUploadRows(c.Request.Context(), principal(c).OrgID, a, id, params)
	if err != nil {
		return err
	}
	out := make([]uploadRowView, len(rows))
	for i, r := range rows {
		out[i] = uploadRowView{ID: strconv.FormatInt(r.RowNo, 10), Status: r.Status, Message: r.Message, ImportedData: r.ImportedData}
		if r.UserID != nil {
			out[i].UserID = models.FormatID(*r.UserID)
		}
	}
	c.JSON(http.StatusOK, gin.H{"data": out, "meta": meta})
	return nil
}

// mgmtDeleteUploadData: DELETE …/uploads/{upload_id}/data?ids=…&filter=….
// Answers 200 {data: {deleted_count, results: [{resource_id, status: 204 |
// 404}]}}, one result per id in the order given.
func (s *Server) mgmtDeleteUploadData(c *gin.Context) error {
	a, id, err := mgmtActionID(c, "upload_id", management.ErrUploadNotFound)
	if err != nil {
		return err
	}
	q := c.Request.URL.Query()
	var rowNos []int64
	var names []string
	if v := strings.TrimSpace(q.Get("ids")); v != "" {
		names = strings.Split(v, ",")
		if len(names) > management.MaxUploadRowIDs {
			return asParamError(models.Invalid("ids", "names %d rows; at most %d", len(names), management.MaxUploadRowIDs))
		}
		for i, n := range names {
			names[i] = strings.TrimSpace(n)
			no, parseErr := strconv.ParseInt(names[i], 10, 64)
			if parseErr != nil || no < 1 {
				return asParamError(models.Invalid("ids", "%q is not a row id", truncateName(names[i])))
			}
			rowNos = append(rowNos, no)
		}
	}
	filter := strings.TrimSpace(q.Get("filter"))
	removed, total, err := s.store.Management.DeleteUploadRows(c.Request.Context(), principal(c).OrgID, a, id, rowNos, filter)
	if err != nil {
		return asParamError(err)
	}
	results := make([]bulkResult, len(names))
	for i, n := range names {
		results[i] = bulkResult{ResourceID: n, Status: http.StatusNoContent}
		if !removed[i] {
			results[i].Status = http.StatusNotFound
			results[i].Error = &ErrorDetail{Code: CodeNotFound, Title: "Row Not Found", Detail: "the upload has no such row"}
		}
	}
	c.JSON(http.StatusOK, gin.H{"data": gin.H{"deleted_count": total, "results": results}})
	return nil
}

// executeRequest is the body of POST …/execute: exactly one of upload_id,
// user_ids and filter (the filter may come as the query's filter instead),
// and target_container for move-users.
type executeRequest struct {
	UploadID        json.Number `json:"upload_id"`
	UserIDs         []string    `json:"user_ids"`
	Filter          string      `json:"filter"`
	TargetContainer string      `json:"target_container"`
}

// executionAccepted is the answer of execute and retry (202).
type executionAccepted struct {
	Data struct {
		ExecutionID int64  `json:"execution_id"`
		JobID       string `json:"job_id"`
		Status      string `json:"status"`
		Attempt     int    `json:"attempt"`
	} `json:"data"`
	Links struct {
		Execution struct {
			Href string `json:"href"`
		} `json:"execution"`
		Status struct {
			Href string `json:"href"`
		} `json:"status"`
		Job struct {
			Href string `json:"href"`
		} `json:"job"`
	} `json:"links"`
}

// mgmtExecute: POST …/execute. The selection's users are frozen and the
// execution written with its QUEUED job in one transaction; the job's
// workflow is started after the commit (202 either way: a start that fails
// is left to the reconciler).
func (s *Server) mgmtExecute(c *gin.Context) error {
	a, err := mgmtAction(c)
	if err != nil {
		return err
	}
	p := principal(c)
	var req executeRequest
	if err = decodeJSON(c, &req); err != nil {
		return err
	}
	sel := management.Selection{Filter: strings.TrimSpace(req.Filter)}
	if qf := strings.TrimSpace(c.Query("filter")); qf != "" {
		if sel.Filter != "" {
			return models.Invalid("filter", "is given both in the query and in the body")
		}
		sel.Filter = qf
	}
	if req.UploadID != "" {
		// CreateExecution reads the upload, once, in its transaction.
		if sel.UploadID, err = models.ParseID("upload_id", string(req.UploadID)); err != nil {
			return err
		}
	}
	if req.UserIDs != nil {
		if len(req.UserIDs) > management.MaxSelectionUserIDs {
			return models.Invalid("user_ids", "names %d users; at most %d", len(req.UserIDs), management.MaxSelectionUserIDs)
		}
		sel.UserIDs = make([]int64, 0, len(req.UserIDs))
		for _, v := range req.UserIDs {
			var id int64
			if id, err = models.ParseID("user_ids", v); err != nil {
				return err
			}
			sel.UserIDs = append(sel.UserIDs, id)
		}
		if len(sel.UserIDs) == 0 {
			return models.Invalid("user_ids", "names no users")
		}
	}
	exec, job, err := s.store.Management.CreateExecution(c.Request.Context(), management.NewExecution{
		OrgID: p.OrgID, Action: a, Selection: sel, TargetContainer: req.TargetContainer, CreatedBy: p.UserID})
	if err != nil {
		return err
	}
	s.acceptExecution(c, a, exec, job)
	return nil
}

// acceptExecution starts the attempt's job (startJob) and answers 202.
func (s *Server) acceptExecution(c *gin.Context, a management.MgmtAction, exec *management.Execution, job *jobs.Job) {
	s.startJob(c, job)
	var resp executionAccepted
	jobID := models.FormatID(job.ID)
	resp.Data.ExecutionID, resp.Data.JobID, resp.Data.Status, resp.Data.Attempt = exec.ID, jobID, string(exec.Status), exec.Attempt
	execHref := "/api/v1/management/actions/" + string(a) + "/executions/" + models.FormatID(exec.ID)
	resp.Links.Execution.Href = execHref
	resp.Links.Status.Href = execHref + "/status"
	resp.Links.Job.Href = "/api/v1/jobs/" + jobID
	c.Header("Location", execHref)
	c.JSON(http.StatusAccepted, resp)
}

// executionView is an execution as the API shows it (spec 2.16, with the
// service's additions).
type executionView struct {
	ID              int64           `json:"id"`
	Action          string          `json:"action"`
	Status          string          `json:"status"`
	Attempt         int             `json:"attempt"`
	JobID           string          `json:"job_id"`
	SuccessCount    int64           `json:"success_count"`
	FailedCount     int64           `json:"failed_count"`
	Total           int64           `json:"total"`
	SummaryData     []summaryItem   `json:"summary_data"`
	Selection       json.RawMessage `json:"selection"`
	TargetContainer string          `json:"target_container,omitempty"`
	CreatedBy       string          `json:"created_by"`
	CreatedAt       time.Time       `json:"created_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	Attempts        []attemptView   `json:"attempts"`
}

type summaryItem struct {
	Label string `json:"label"`
	Value int64  `json:"value"`
	Type  string `json:"type"`
}

type attemptView struct {
	Attempt      int        `json:"attempt"`
	JobID        string     `json:"job_id"`
	Status       string     `json:"status"`
	Total        int64      `json:"total"`
	SuccessCount int64      `json:"success_count"`
	FailedCount  int64      `json:"failed_count"`
	CreatedBy    string     `json:"created_by"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at"`
}

func (s *Server) execution(c *gin.Context) (management.MgmtAction, *management.Execution, error) {
	a, id, err := mgmtActionID(c, "execution_id", management.ErrExecutionNotFound)
	if err != nil {
		return "", nil, err
	}
	exec, err := s.store.Management.GetExecution(c.Request.Context(), principal(c).OrgID, a, id)
	return a, exec, err
}

// mgmtExecutionStatus: GET …/executions/{id}/status, {data: status}.
func (s *Server) mgmtExecutionStatus(c *gin.Context) error {
	_, exec, err := s.execution(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": exec.Status})
	return nil
}

// mgmtGetExecution: GET …/executions/{id}.
func (s *Server) mgmtGetExecution(c *gin.Context) error {
	_, exec, err := s.execution(c)
	if err != nil {
		return err
	}
	atts, err := s.store.Management.Attempts(c.Request.Context(), exec.ID)
	if err != nil {
		return err
	}
	v := executionView{ID: exec.ID, Action: string(exec.Action), Status: string(exec.Status), Attempt: exec.Attempt,
		JobID: models.FormatID(exec.JobID), SuccessCount: exec.SuccessCount, FailedCount: exec.FailedCount, Total: exec.Total,
		Selection: exec.Selection, TargetContainer: exec.TargetContainer, CreatedBy: models.FormatID(exec.CreatedBy),
		CreatedAt: exec.CreatedAt.UTC(), FinishedAt: utcPtr(exec.FinishedAt),
		SummaryData: []summaryItem{
			{Label: "Users selected", Value: exec.Total, Type: "TOTAL"},
			{Label: "Succeeded", Value: exec.SuccessCount, Type: "SUCCESS"},
			{Label: "Failed", Value: exec.FailedCount, Type: "FAILURE"},
			{Label: "Attempts", Value: int64(exec.Attempt), Type: "ATTEMPTS"},
		}}
	for _, a := range atts {
		v.Attempts = append(v.Attempts, attemptView{Attempt: a.Attempt, JobID: models.FormatID(a.JobID), Status: string(a.Status),
			Total: a.Total, SuccessCount: a.SuccessCount, FailedCount: a.FailedCount, CreatedBy: models.FormatID(a.CreatedBy),
			CreatedAt: a.CreatedAt.UTC(), FinishedAt: utcPtr(a.FinishedAt)})
	}
	c.JSON(http.StatusOK, gin.H{"data": v})
	return nil
}

// executionResultView is a per-user result (spec 2.16), with its attempt.
type executionResultView struct {
	User struct {
		ID        string `json:"id"`
		FirstName string `json:"first_name"`
		LastName  string `json:"last_name"`
		Email     string `json:"email"`
	} `json:"user"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Attempt int    `json:"attempt"`
}

// mgmtExecutionData: GET …/executions/{id}/data (from default 0, limit,
// filter on user_id, email, status, message; attempt, default the
// current); with Accept: text/csv every result of the attempt as a CSV
// file (jobs_results_csv.go).
func (s *Server) mgmtExecutionData(c *gin.Context) error {
	a, id, err := mgmtActionID(c, "execution_id", management.ErrExecutionNotFound)
	if err != nil {
		return err
	}
	q := c.Request.URL.Query()
	attempt := 0
	if v := q.Get("attempt"); v != "" {
		if attempt, err = strconv.Atoi(v); err != nil || attempt < 1 {
			return asParamError(models.Invalid("attempt", "must be an attempt number from 1"))
		}
	}
	if wantsCSV(c) {
		return s.mgmtExecutionCSV(c, a, id, attempt)
	}
	params, err := listing.Parse(q, management.ExecutionResultListing)
	if err != nil {
		return err
	}
	results, meta, err := s.store.Management.ListResults(c.Request.Context(), principal(c).OrgID, a, id, attempt, params)
	if err != nil {
		return err
	}
	out := make([]executionResultView, len(results))
	for i, r := range results {
		v := &out[i]
		v.User.ID, v.User.FirstName, v.User.LastName, v.User.Email = models.FormatID(r.UserID), r.FirstName, r.LastName, r.Email
		v.Status, v.Message, v.Attempt = r.Status, r.Message, r.Attempt
	}
	c.JSON(http.StatusOK, gin.H{"data": out, "meta": meta})
	return nil
}

// mgmtRetry: POST …/executions/{id}/retry. A new attempt over the users
// the current one did not succeed for, with a new job; 202 as execute.
// 409 while the execution runs, or when nothing failed.
func (s *Server) mgmtRetry(c *gin.Context) error {
	a, id, err := mgmtActionID(c, "execution_id", management.ErrExecutionNotFound)
	if err != nil {
		return err
	}
	p := principal(c)
	// Reading it first settles an execution whose job was deleted
	// (interrupted), which may then be retried.
	if _, err = s.store.Management.GetExecution(c.Request.Context(), p.OrgID, a, id); err != nil {
		return err
	}
	exec, job, err := s.store.Management.Retry(c.Request.Context(), p.OrgID, a, id, p.UserID)
	if err != nil {
		return err
	}
	s.acceptExecution(c, a, exec, job)
	return nil
}

// mgmtExecuteMaxBody bounds an execute body: MaxSelectionUserIDs ids of 20
// digits, quoted, with room for a filter and a container.
const mgmtExecuteMaxBody = management.MaxSelectionUserIDs*24 + 64<<10
