package api

import (
	"encoding/json"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/safezip"
)

// uploadSmartCards: POST /protection/quick-enrollment/upload-smartcards.
// The whole form is read first, its parts in any order, the ZIP spooled to
// a temporary file (never held in memory); its directory is checked (a ZIP,
// not too many entries, not too much to unpack), then the archive and its
// job are stored as a CSV's are (models.Store.CreateUploadJob). Entries that
// are unsafe or not certificates become per-row errors of the job.
func (s *Server) uploadSmartCards(c *gin.Context) error {
	p := principal(c)
	form, err := readUploadForm(c, s.cfg.UploadMaxBytes, s.cfg.UploadIdleTimeout)
	if err != nil {
		return err
	}
	defer form.Close()
	configs, err := s.smartCardConfigs(c, form)
	if err != nil {
		return err
	}
	pattern, ok := enrollment.ParseUserKey(form.value("certificate_filename_pattern"))
	if !ok {
		return models.Invalid("certificate_filename_pattern", "must be one of: Primary Email, Employee ID, Mobile Number")
	}
	overwrite, err := form.bool("overwrite_enrollment_data")
	if err != nil {
		return err
	}
	chunkRows, err := form.chunkRows(500)
	if err != nil {
		return err
	}

	archive, err := safezip.Open(form.file, form.fileSize, safezip.DefaultLimits)
	if err != nil {
		return models.Invalid("file", "%v", err)
	}
	if len(archive.Entries) == 0 {
		return models.Invalid("file", "the archive holds no files")
	}

	input := enrollment.EnrollSmartCardsInput{
		FileName: form.fileName, Overwrite: overwrite, FilenamePattern: pattern,
		Entries: int64(len(archive.Entries)), ChunkRows: chunkRows,
	}
	for _, cfg := range configs {
		input.FactorConfigIDs = append(input.FactorConfigIDs, cfg.ID)
	}
	job := &jobs.Job{
		OrgID: p.OrgID, Kind: jobs.EnrollSmartCardsJobKind, Module: enrollment.EnrollmentModule,
		ActionName: enrollment.EnrollSmartCardsAction, Entity: enrollment.EnrollmentEntity, CreatedBy: p.UserID,
	}
	file := jobs.FileUpload{Name: form.fileName, ContentType: "application/zip", Body: form.file, MaxSize: s.cfg.UploadMaxBytes}
	err = s.store.Jobs.CreateUploadJob(c.Request.Context(), job, file, func(blob *jobs.Blob) (json.RawMessage, error) {
		input.BlobID = blob.ID
		return json.Marshal(input)
	})
	if err != nil {
		return uploadWriteError(c, err)
	}
	s.acceptJob(c, job, "the archive")
	return nil
}

// smartCardConfigs resolves factor_configs for a smart-card upload: smart
// card configs only; the organization's smart card config when omitted.
func (s *Server) smartCardConfigs(c *gin.Context, f *uploadForm) ([]enrollment.FactorConfig, error) {
	if len(f.fields["factor_configs"]) == 0 {
		all, err := s.store.Factors.List(c.Request.Context(), principal(c).OrgID)
		if err != nil {
			return nil, err
		}
		for _, cfg := range all {
			if cfg.Type == enrollment.FactorSmartCard {
				return []enrollment.FactorConfig{cfg}, nil
			}
		}
	}
	configs, err := s.factorConfigs(c, f)
	if err != nil {
		return nil, err
	}
	for _, cfg := range configs {
		if cfg.Type != enrollment.FactorSmartCard {
			return nil, models.Invalid("factor_configs", "%s is not a smart card config; a smart-card upload enrolls smart cards only", cfg.DisplayName)
		}
	}
	return configs, nil
}
