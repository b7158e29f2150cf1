package enrollment

// Quick enrollment job identity: the module and action names its job rows
// show, and the entity they work on.
const (
	EnrollmentModule       = "QuickEnrollment"
	EnrollCSVAction        = "Upload CSV"
	EnrollSmartCardsAction = "Upload Smart Cards"
	EnrollmentEntity       = "user"
)

// EnrollCSVInput is the input of a CSV enrollment job, stored with the job
// row. The file stays in the blob store; the header was checked at upload.
type EnrollCSVInput struct {
	BlobID   int64  `json:"blob_id,string"`
	FileName string `json:"file_name"`
	// Encoding is the decoder to read the file with (csvimport.Lookup): the
	// file_encoding chosen, GB2312 resolved to GBK or HZ-GB-2312.
	Encoding        string  `json:"encoding"`
	FactorConfigIDs []int64 `json:"factor_config_ids"`
	Overwrite       bool    `json:"overwrite_enrollment_data"`
	// Header is the file's header as written; UserColumn the column that
	// identifies the user.
	Header     []string `json:"header"`
	UserColumn string   `json:"user_column"`
	// DataOffset is the byte offset of the first row after the header.
	DataOffset int64 `json:"data_offset"`
	// ChunkRows is how many rows one activity processes.
	ChunkRows int `json:"chunk_rows"`
}

// EnrollSmartCardsInput is the input of a smart-card enrollment job.
type EnrollSmartCardsInput struct {
	BlobID          int64   `json:"blob_id,string"`
	FileName        string  `json:"file_name"`
	FactorConfigIDs []int64 `json:"factor_config_ids"`
	Overwrite       bool    `json:"overwrite_enrollment_data"`
	// FilenamePattern is the user attribute each file name's stem holds.
	FilenamePattern UserKey `json:"certificate_filename_pattern"`
	// Entries is the number of rows (certificate files) in the archive.
	Entries   int64 `json:"entries"`
	ChunkRows int   `json:"chunk_rows"`
}

// DefaultEnrollChunkRows is the rows per chunk activity when a job does not
// say otherwise.
const DefaultEnrollChunkRows = 5000
