package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
)

// Bounds of an upload form's text: one field, the number of parts (text
// fields and the file), and all the text together.
const (
	maxFormField     = 64 << 10
	maxFormParts     = 64
	maxFormTextBytes = 256 << 10
)

// uploadForm is the multipart form of an upload route, read whole before
// anything is checked, so its parts may come in any order: the text fields,
// and the file part spooled to a temporary file (never held in memory, and
// no database work while the client sends). Close removes the spool.
type uploadForm struct {
	fields   map[string][]string
	file     *os.File
	fileName string
	fileSize int64
}

// Close removes the spooled file.
func (f *uploadForm) Close() {
	if f.file != nil {
		f.file.Close()
		os.Remove(f.file.Name())
		f.file = nil
	}
}

// readUploadForm reads the whole form: at most maxFormParts parts, the text
// fields within maxFormField each and maxFormTextBytes together, each
// NUL-free UTF-8 (textProblem), as the file's name, one "file"
// part of at most maxFile bytes, spooled. A body that is not
// multipart/form-data is 415; a form without a file part, with two, or
// over a bound is 400 (413 for a file over maxFile). Every read of the body
// must bring data within idle, or the upload is cut (400).
func readUploadForm(c *gin.Context, maxFile int64, idle time.Duration) (*uploadForm, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeMediaType, "Unsupported Media Type", "the request body must be multipart/form-data")
	}
	if c.Request.Body != nil && idle > 0 {
		c.Request.Body = &idleBody{ReadCloser: c.Request.Body, rc: http.NewResponseController(c.Writer), idle: idle}
	}
	mr, err := c.Request.MultipartReader()
	if err != nil {
		return nil, errInvalidBody("the multipart body cannot be read: %v", err)
	}
	f := &uploadForm{fields: map[string][]string{}}
	if err := f.read(mr, maxFile); err != nil {
		f.Close()
		return nil, err
	}
	if idle > 0 {
		// The body is read: storing the file must not be cut by a deadline
		// meant for the client.
		_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Time{})
	}
	return f, nil
}

func (f *uploadForm) read(mr *multipart.Reader, maxFile int64) error {
	parts, text := 0, 0
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadReadError(err)
		}
		if parts++; parts > maxFormParts {
			return errInvalidBody("the form has more than %d parts", maxFormParts)
		}
		name := part.FormName()
		if name == "file" {
			if f.file != nil {
				return models.Invalid("file", "is given twice; send one file")
			}
			if err := f.spool(part, maxFile); err != nil {
				return err
			}
			continue
		}
		value, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
		if err != nil {
			return uploadReadError(err)
		}
		if len(value) > maxFormField {
			return models.Invalid(name, "is longer than %d bytes", maxFormField)
		}
		if problem := textProblem(string(value)); problem != "" {
			return models.Invalid(name, "%s", problem)
		}
		if text += len(name) + len(value); text > maxFormTextBytes {
			return errInvalidBody("the form's text fields hold more than %d bytes", maxFormTextBytes)
		}
		f.fields[name] = append(f.fields[name], string(value))
	}
	if f.file == nil {
		return models.Invalid("file", "is required")
	}
	return nil
}

// spool copies the file part to a temporary file.
func (f *uploadForm) spool(part *multipart.Part, maxFile int64) error {
	tmp, err := os.CreateTemp("", "iam-upload-*")
	if err != nil {
		return fmt.Errorf("spool upload: %w", err)
	}
	f.file, f.fileName = tmp, part.FileName()
	if problem := textProblem(f.fileName); problem != "" {
		return models.Invalid("file", "the file name %s", problem)
	}
	n, err := io.Copy(tmp, io.LimitReader(part, maxFile+1))
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			return fmt.Errorf("spool upload: %w", err)
		}
		return uploadReadError(err)
	}
	if n > maxFile {
		return &models.Error{Code: models.ETOOLARGE, Field: "file", Detail: fmt.Sprintf("the file is larger than %d bytes", maxFile)}
	}
	f.fileSize = n
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("rewind upload: %w", err)
	}
	return nil
}

// idleBody cuts a request body that brings no data for idle: each read
// extends the connection's read deadline, so a slow but steady upload goes
// on while a stalled one ends.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

// errUploadStalled is the error of a body read that timed out.
type errUploadStalled struct{ idle time.Duration }

func (e errUploadStalled) Error() string {
	return fmt.Sprintf("no data was received for %s", e.idle)
}

func (b *idleBody) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle)) // not supported: no idle cut
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errUploadStalled{b.idle}
	}
	return n, err
}

// uploadReadError explains a failure to read the request body: over the
// limit (413), stalled, or cut short by the client.
func uploadReadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return err
	}
	var me *models.Error
	if errors.As(err, &me) {
		return err
	}
	var stalled errUploadStalled
	if errors.As(err, &stalled) {
		return errInvalidBody("the upload stalled (%v); nothing was kept", stalled)
	}
	return errInvalidBody("the upload ended before the whole form was received; nothing was kept")
}

// value returns the last value of a text field, trimmed, or "".
func (f *uploadForm) value(name string) string {
	vs := f.fields[name]
	if len(vs) == 0 {
		return ""
	}
	return strings.TrimSpace(vs[len(vs)-1])
}

// bool reads a boolean field (default false).
func (f *uploadForm) bool(name string) (bool, error) {
	v := f.value(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, models.Invalid(name, "must be true or false")
	}
	return b, nil
}

// chunkRows reads the optional chunk_rows field: rows per processing step.
func (f *uploadForm) chunkRows(def int) (int, error) {
	v := f.value("chunk_rows")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 10 || n > 20000 {
		return 0, models.Invalid("chunk_rows", "must be an integer from 10 to 20000")
	}
	return n, nil
}

// factorConfigs resolves the factor_configs field.
func (s *Server) factorConfigs(c *gin.Context, f *uploadForm) ([]models.FactorConfig, error) {
	ids, err := parseIDList("factor_configs", f.fields["factor_configs"])
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, models.Invalid("factor_configs", "is required (factor config ids)")
	}
	return s.store.Factors.Resolve(c.Request.Context(), principal(c).OrgID, ids)
}

// csvUploadFailed is the 00000114 error of a CSV whose header or encoding
// does not fit the import option.
func csvUploadFailed(causes []models.Cause) error {
	e := newAPIError(http.StatusBadRequest, CodeCSVUploadFailed, "CSV_UPLOAD_FAILED",
		"the file does not fit the import option: "+causes[0].Title)
	if len(causes) > 1 {
		e.Body.Detail = fmt.Sprintf("the file does not fit the import option (%d problems, see causes)", len(causes))
	}
	e.Body.Causes = causes
	return e
}
