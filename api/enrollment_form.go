package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"iam/models"
)

// maxFormField bounds one text field of an upload form.
const maxFormField = 64 << 10

// uploadForm is the multipart form of an upload route, read as a stream:
// the text fields, then the file part, which must come last (it is never
// held whole: the handler streams it on).
type uploadForm struct {
	fields   map[string][]string
	file     *multipart.Part
	fileName string
}

// readUploadForm reads the form's text fields up to its "file" part. A
// body that is not multipart/form-data is 415; a form without a file part,
// or with fields after it, is 400.
func readUploadForm(c *gin.Context) (*uploadForm, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeMediaType, "Unsupported Media Type", "the request body must be multipart/form-data")
	}
	mr, err := c.Request.MultipartReader()
	if err != nil {
		return nil, errInvalidBody("the multipart body cannot be read: %v", err)
	}
	f := &uploadForm{fields: map[string][]string{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, models.Invalid("file", "is required (the last part of the form)")
		}
		if err != nil {
			return nil, uploadReadError(err)
		}
		name := part.FormName()
		if name == "file" {
			f.file, f.fileName = part, part.FileName()
			return f, nil
		}
		value, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
		if err != nil {
			return nil, uploadReadError(err)
		}
		if len(value) > maxFormField {
			return nil, models.Invalid(name, "is longer than %d bytes", maxFormField)
		}
		f.fields[name] = append(f.fields[name], string(value))
	}
}

// uploadReadError explains a failure to read the request body: over the
// limit (413), or cut short by the client.
func uploadReadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return err
	}
	var me *models.Error
	if errors.As(err, &me) {
		return err
	}
	return errInvalidBody("the upload ended before the whole form was received")
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
		return nil, models.Invalid("factor_configs", "is required (factor config ids, before the file part)")
	}
	return models.NewFactorStore(s.store.DB).Resolve(c, principal(c).OrgID, ids)
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
