package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/csvimport"
	"iam/workflows"
)

// uploadCSV: POST /protection/quick-enrollment/upload-csv. The form's text
// fields come first, then the file, which is streamed into the blob store:
// the header is checked on the first bytes before anything is written, and
// the blob, the job row and its input are written in one transaction, so an
// upload cut short leaves nothing behind. The workflow is started after the
// commit (202, or QUEUED when Temporal is unreachable).
func (s *Server) uploadCSV(c *gin.Context) {
	if err := s.doUploadCSV(c); err != nil {
		abortWithError(c, err)
	}
}

func (s *Server) doUploadCSV(c *gin.Context) error {
	p := principal(c)
	form, err := readUploadForm(c)
	if err != nil {
		return err
	}
	configs, err := s.factorConfigs(c, form)
	if err != nil {
		return err
	}
	encName := form.value("file_encoding")
	if encName == "" {
		encName = "UTF-8"
	}
	enc, ok := csvimport.Lookup(encName)
	if !ok || strings.EqualFold(enc.Name, csvimport.GBK) || strings.EqualFold(enc.Name, csvimport.HZ) {
		return models.Invalid("file_encoding", "must be one of: %s", strings.Join(csvimport.Names, ", "))
	}
	overwrite, err := form.bool("overwrite_enrollment_data")
	if err != nil {
		return err
	}
	chunkRows, err := form.chunkRows(models.DefaultEnrollChunkRows)
	if err != nil {
		return err
	}

	br := bufio.NewReaderSize(form.file, csvimport.SampleSize)
	sample, err := br.Peek(csvimport.SampleSize)
	atEOF := errors.Is(err, io.EOF)
	if err != nil && !atEOF && !errors.Is(err, bufio.ErrBufferFull) {
		return uploadReadError(err)
	}
	ins, problems := csvimport.Inspect(sample, atEOF, enc)
	var userColumn string
	if len(problems) == 0 {
		var cols csvimport.Columns
		cols, problems = csvimport.CheckHeader(ins.Header, models.UserColumns, csvNeeds(configs))
		userColumn = cols.UserColumn
	}
	if len(problems) > 0 {
		causes := make([]models.Cause, len(problems))
		for i, pr := range problems {
			causes[i] = models.Cause{Title: pr.Title, Detail: pr.Detail}
		}
		return csvUploadFailed(causes)
	}

	input := models.EnrollCSVInput{
		FileName:   form.fileName,
		Encoding:   ins.Encoding.Name,
		Overwrite:  overwrite,
		Header:     ins.Header,
		UserColumn: userColumn,
		DataOffset: ins.DataOffset,
		ChunkRows:  chunkRows,
	}
	for _, cfg := range configs {
		input.FactorConfigIDs = append(input.FactorConfigIDs, cfg.ID)
	}
	job := &models.Job{
		OrgID: p.OrgID, Kind: workflows.EnrollCSVWorkflowName, Module: models.EnrollmentModule,
		ActionName: models.EnrollCSVAction, Entity: models.EnrollmentEntity, CreatedBy: p.UserID,
	}
	err = s.store.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		blob, err := s.store.Blobs.Put(ctx, tx, p.OrgID, form.fileName, "text/csv", br, s.cfg.UploadMaxBytes)
		if err != nil {
			return err
		}
		input.BlobID = blob.ID
		if job.Input, err = json.Marshal(input); err != nil {
			return err
		}
		return s.store.Jobs.Create(ctx, tx, job)
	})
	if err != nil {
		return uploadWriteError(c, err)
	}
	s.acceptJob(c, job, "the file")
	return nil
}

// uploadWriteError classifies a failed upload transaction: over the limit
// (413), the client went away or cut the body short (400), or internal.
func uploadWriteError(c *gin.Context, err error) error {
	var tooLarge *http.MaxBytesError
	var me *models.Error
	switch {
	case errors.As(err, &tooLarge), errors.As(err, &me):
		return err
	case c.Request.Context().Err() != nil, errors.Is(err, io.ErrUnexpectedEOF):
		logger(c).Warn("upload cut short; nothing was kept", "error", err)
		return errInvalidBody("the upload ended before the whole file was received; nothing was kept")
	}
	return err
}

// csvNeeds lists the CSV columns of the chosen factor configs.
func csvNeeds(configs []models.FactorConfig) []csvimport.Need {
	var out []csvimport.Need
	for _, cfg := range configs {
		for _, col := range cfg.Columns() {
			out = append(out, csvimport.Need{Column: col, For: cfg.DisplayName})
		}
	}
	return out
}
