package api

import (
	"encoding/json"
	"fmt"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/csvimport"
	"iam/models/enrollment"
	"iam/models/jobs"
)

// uploadCSV: POST /protection/quick-enrollment/upload-csv. The whole form
// is read first, its parts in any order, the file spooled to a temporary
// file; then the fields and the file's header are checked, and the file and
// its job are stored (models.Store.CreateUploadJob: the file in short
// transactions, the job in one). No transaction is open while the client
// sends, and an upload cut short leaves nothing behind. The workflow is
// started after the commit (202, or QUEUED when Temporal is unreachable).
func (s *Server) uploadCSV(c *gin.Context) error {
	p := principal(c)
	form, err := readUploadForm(c, s.cfg.UploadMaxBytes, s.cfg.UploadIdleTimeout)
	if err != nil {
		return err
	}
	defer form.Close()
	configs, err := s.factorConfigs(c, form)
	if err != nil {
		return err
	}
	enc, err := form.encoding()
	if err != nil {
		return err
	}
	overwrite, err := form.bool("overwrite_enrollment_data")
	if err != nil {
		return err
	}
	chunkRows, err := form.chunkRows(enrollment.DefaultEnrollChunkRows)
	if err != nil {
		return err
	}

	sample := make([]byte, min(form.fileSize, csvimport.SampleSize))
	if _, err = form.file.ReadAt(sample, 0); err != nil {
		return fmt.Errorf("read spooled upload: %w", err)
	}
	ins, problems := csvimport.Inspect(sample, form.fileSize <= csvimport.SampleSize, enc)
	var userColumn string
	if len(problems) == 0 {
		var cols csvimport.Columns
		cols, problems = csvimport.CheckHeader(ins.Header, enrollment.UserColumns, csvNeeds(configs))
		userColumn = cols.UserColumn
	}
	if len(problems) > 0 {
		causes := make([]models.Cause, len(problems))
		for i, pr := range problems {
			causes[i] = models.Cause{Title: pr.Title, Detail: pr.Detail}
		}
		return csvUploadFailed(causes)
	}

	input := enrollment.EnrollCSVInput{
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
	job := &jobs.Job{
		OrgID: p.OrgID, Kind: jobs.EnrollCSVJobKind, Module: enrollment.EnrollmentModule,
		ActionName: enrollment.EnrollCSVAction, Entity: enrollment.EnrollmentEntity, CreatedBy: p.UserID,
	}
	file := jobs.FileUpload{Name: form.fileName, ContentType: "text/csv", Body: form.file, MaxSize: s.cfg.UploadMaxBytes}
	err = s.store.Jobs.CreateUploadJob(c.Request.Context(), job, file, func(blob *jobs.Blob) (json.RawMessage, error) {
		input.BlobID = blob.ID
		return json.Marshal(input)
	})
	if err != nil {
		return uploadWriteError(c, err)
	}
	s.acceptJob(c, job, "the file")
	return nil
}

// csvNeeds lists the CSV columns of the chosen factor configs.
func csvNeeds(configs []enrollment.FactorConfig) []csvimport.Need {
	var out []csvimport.Need
	for _, cfg := range configs {
		for _, col := range cfg.Columns() {
			out = append(out, csvimport.Need{Column: col, For: cfg.DisplayName})
		}
	}
	return out
}

// factorConfigs resolves the factor_configs field.
func (s *Server) factorConfigs(c *gin.Context, f *uploadForm) ([]enrollment.FactorConfig, error) {
	ids, err := parseIDList("factor_configs", f.fields["factor_configs"])
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, models.Invalid("factor_configs", "is required (factor config ids)")
	}
	return s.store.Factors.Resolve(c.Request.Context(), principal(c).OrgID, ids)
}
