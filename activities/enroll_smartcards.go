package activities

import (
	"context"
	"io"
	"path"
	"strings"

	"iam/models/enrollment"
	"iam/models/jobs"
	"iam/models/safezip"
)

// EnrollSmartCardChunk asks for the archive entries [From, To) of a
// smart-card enrollment job (entry i is row i+1).
type EnrollSmartCardChunk struct {
	Job    jobs.JobRef                      `json:"job"`
	Params enrollment.EnrollSmartCardsInput `json:"params"`
	From   int64                            `json:"from"`
	To     int64                            `json:"to"`
	Before Progress                         `json:"before"`
}

// certificateExtensions are the file name extensions of certificate files.
var certificateExtensions = []string{".cer", ".crt", ".pem", ".der"}

// EnrollSmartCards processes one chunk of a smart-card archive: each entry's
// name stem names a user (by the job's certificate_filename_pattern), its
// content is parsed as a certificate, and the users' smart-card enrollments
// and per-row results are written in one transaction.
func (a *Enrollment) EnrollSmartCards(ctx context.Context, in EnrollSmartCardChunk) (EnrollChunkResult, error) {
	p := in.Params
	plan, err := a.plan(ctx, in.Job.OrgID, p.FactorConfigIDs)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	for _, c := range plan.configs {
		if c.Type != enrollment.FactorSmartCard {
			return EnrollChunkResult{}, invalidInput("factor config %d is not a smart card config", c.ID)
		}
	}
	_, blob, err := a.openBlobAt(ctx, in.Job.OrgID, p.BlobID)
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	ra := &blobReaderAt{ctx: ctx, blobs: a.Store.Blobs, org: in.Job.OrgID, id: p.BlobID, size: blob.Size}
	archive, err := safezip.Open(ra, blob.Size, safezip.DefaultLimits)
	if err != nil {
		return EnrollChunkResult{}, invalidInput("the archive cannot be read: %v", err)
	}
	to := min(in.To, int64(len(archive.Entries)))
	rows := make([]pendingRow, 0, max(to-in.From, 0))
	for i := in.From; i < to; i++ {
		e := archive.Entries[i]
		rows = append(rows, a.parseEntry(archive, e, p.FilenamePattern, plan))
		heartbeat(ctx, i)
		if err = ctx.Err(); err != nil {
			return EnrollChunkResult{}, err
		}
	}
	chunk, err := a.finish(ctx, in.Job.OrgID, p.FilenamePattern, rows)
	if err != nil {
		return EnrollChunkResult{}, err
	}
	before := in.Before
	before.Total = max(before.Total, int64(len(archive.Entries)))
	progress, err := a.Store.Enrollments.ApplyChunk(ctx, &enrollment.EnrollChunk{
		OrgID: in.Job.OrgID, JobID: in.Job.JobID, Overwrite: p.Overwrite,
		Rows: chunk, Before: before, NextRow: to + 1, NextOffset: -1, Names: plan.names,
	})
	if err != nil {
		return EnrollChunkResult{}, temporalError(err)
	}
	testHookChunkCommitted()
	return EnrollChunkResult{Progress: progress, Next: to, Done: to >= int64(len(archive.Entries))}, nil
}

// parseEntry reads one archive entry into a pending row.
func (a *Enrollment) parseEntry(archive *safezip.Archive, e safezip.Entry, key enrollment.UserKey, plan *factorPlan) pendingRow {
	row := pendingRow{row: int64(e.Index) + 1}
	if e.Problem != "" {
		row.fail("%s: %s", safeName(e.Name), e.Problem)
		return row
	}
	base := path.Base(strings.ReplaceAll(e.Name, "\\", "/"))
	ext := strings.ToLower(path.Ext(base))
	known := false
	for _, c := range certificateExtensions {
		known = known || ext == c
	}
	if !known {
		row.fail("%s: not a certificate file (.cer, .crt, .pem or .der)", safeName(e.Name))
		return row
	}
	row.key = key.NormalizeKey(strings.TrimSuffix(base, path.Ext(base)))
	if row.key == "" {
		row.fail("%s: the file name does not name a user", safeName(e.Name))
		return row
	}
	data, err := archive.Read(e)
	if err != nil {
		row.fail("%s: %v", safeName(e.Name), err)
		return row
	}
	info, err := certificateOf(data)
	if err != nil {
		row.fail("%s: %v", safeName(e.Name), err)
		return row
	}
	for _, c := range plan.configs {
		row.addCert(c.ID, info.Cert)
		row.data = append(row.data, enrollment.Enrollment{
			FactorConfigID: c.ID, FactorType: c.Type,
			Value: info.Subject, Thumbprint: info.Thumbprint, ExpiresAt: &info.NotAfter,
		})
	}
	return row
}

// safeName shows an entry name in a message: control characters and
// invalid UTF-8 replaced, at most 200 bytes.
func safeName(name string) string {
	if len(name) > 200 {
		name = name[:200] + "…"
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, name), "?")
}

// openBlobAt describes a blob without reading it.
func (a *Enrollment) openBlobAt(ctx context.Context, orgID, id int64) (io.ReadCloser, *jobs.Blob, error) {
	rc, blob, err := a.Store.Blobs.Open(ctx, orgID, id, 0)
	if err != nil {
		return nil, nil, err
	}
	_ = rc.Close() // not read: only the description was wanted
	return nil, blob, nil
}

// blobReaderAt gives random access to a blob, fetching a window of up to
// 1 MiB at a time: what archive/zip needs to read a ZIP from the blob store.
type blobReaderAt struct {
	ctx    context.Context
	blobs  jobs.BlobStore
	org    int64
	id     int64
	size   int64
	win    []byte
	winOff int64
}

const blobWindow = 1 << 20

// ReadAt implements io.ReaderAt.
func (b *blobReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= b.size {
			return n, io.EOF
		}
		if pos < b.winOff || pos >= b.winOff+int64(len(b.win)) {
			if err := b.fetch(pos); err != nil {
				return n, err
			}
		}
		n += copy(p[n:], b.win[pos-b.winOff:])
	}
	return n, nil
}

func (b *blobReaderAt) fetch(pos int64) error {
	rc, _, err := b.blobs.Open(b.ctx, b.org, b.id, pos)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }() // only read: a failed close loses nothing
	want := min(int64(blobWindow), b.size-pos)
	if cap(b.win) < int(want) {
		b.win = make([]byte, want)
	}
	b.win = b.win[:want]
	m, err := io.ReadFull(rc, b.win)
	b.win, b.winOff = b.win[:m], pos
	if err != nil && m == 0 {
		return err
	}
	return nil
}
