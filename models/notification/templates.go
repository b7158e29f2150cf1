package notification

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"iam/models/audit"
	"iam/models/jobs"
	"iam/models/sqldb"
	"io"
	"time"

	"github.com/uptrace/bun"
)

// Template is a notification template (spec 2.18): a mail part, an SMS part
// or both, for one module.
type Template struct {
	bun.BaseModel `bun:"table:notification_templates"`

	ID             int64                  `bun:"id,pk"`
	OrgID          int64                  `bun:"org_id"`
	Name           string                 `bun:"name"`
	Description    string                 `bun:"description"`
	ShareType      string                 `bun:"share_type"`
	Module         string                 `bun:"module"`
	IsDefault      bool                   `bun:"is_default"`
	Configurations TemplateConfigurations `bun:"configurations,type:json"`
	Mail           *MailTemplate          `bun:"mail,type:json"`
	SMS            *SMSTemplate           `bun:"sms,type:json"`
	CreatedBy      int64                  `bun:"created_by"`
	CreatedAt      time.Time              `bun:"created_at"`
	UpdatedAt      time.Time              `bun:"updated_at"`
}

// TemplateConfigurations are a template's attachment settings (spec 2.18).
type TemplateConfigurations struct {
	AttachmentSettingsEnabled bool `json:"attachment_settings_enabled"`
	AttachmentType            bool `json:"attachment_type"`
	AttachEmptyFiles          bool `json:"attach_empty_files"`
}

// MailTemplate is the mail part of a template. Its files (attachments and
// inline images) are blobs the template owns.
type MailTemplate struct {
	To          []string          `json:"to"`
	Cc          []string          `json:"cc"`
	Subject     string            `json:"subject"`
	Content     string            `json:"content"`
	Severity    string            `json:"severity"`
	Attachments []TemplateFileRef `json:"attachments"`
	// InlineImages are files the content shows as cid:<id>.
	InlineImages []TemplateFileRef `json:"inline_images"`
}

// TemplateFileRef names a file of a template.
type TemplateFileRef struct {
	ID   int64  `json:"id,string"`
	Name string `json:"name"`
}

// SMSTemplate is the SMS part of a template.
type SMSTemplate struct {
	To      []string `json:"to"`
	Content string   `json:"content"`
}

// NewTemplateFile is a file arriving with a create or update: an
// attachment, or an inline image when Inline is set.
type NewTemplateFile struct {
	Name        string
	ContentType string
	Data        []byte
	Inline      bool
	// Field is the request field it came in, for error details.
	Field string
}

// FileIDs returns the ids of every file of the template.
func (t *Template) FileIDs() []int64 {
	if t.Mail == nil {
		return nil
	}
	var ids []int64
	for _, f := range t.Mail.Attachments {
		ids = append(ids, f.ID)
	}
	for _, f := range t.Mail.InlineImages {
		ids = append(ids, f.ID)
	}
	return ids
}

// TemplateStore reads and writes notification templates.
type TemplateStore struct {
	db    bun.IDB
	blobs *jobs.DBBlobStore
}

// NewTemplateStore returns the TemplateStore over db, keeping files in
// blobs.
func NewTemplateStore(db bun.IDB, blobs *jobs.DBBlobStore) *TemplateStore {
	return &TemplateStore{db: db, blobs: blobs}
}

// ErrTemplateNotFound answers for a template that does not exist in the
// organization, or is another user's SELF template.
var ErrTemplateNotFound = models.NotFound("Template", "the notification template does not exist")

// visible restricts q to the templates userID may see.
func visible(q *bun.SelectQuery, orgID, userID int64) *bun.SelectQuery {
	return q.Where("org_id = ?", orgID).Where("(share_type = ? OR created_by = ?)", ShareAll, userID)
}

// Create checks t and inserts it with its new files, filling its id and
// times. EINVALID when a field breaks a rule (ValidateTemplate); ECONFLICT
// when the name is taken in the organization.
func (s *TemplateStore) Create(ctx context.Context, t *Template, files []NewTemplateFile) error {
	t.ID = sqldb.NewID()
	now := time.Now().UTC()
	t.CreatedAt, t.UpdatedAt = now, now
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.write(ctx, tx, t, nil, files); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(t).Exec(ctx); err != nil {
			return templateWriteError(err)
		}
		return record(ctx, t.OrgID, audit.TemplateCreated, templateTarget(t))
	})
}

// Get returns a template userID may see. ENOTFOUND otherwise.
func (s *TemplateStore) Get(ctx context.Context, orgID, userID, id int64) (*Template, error) {
	return s.get(ctx, s.db, orgID, userID, id, false)
}

func (s *TemplateStore) get(ctx context.Context, db bun.IDB, orgID, userID, id int64, forUpdate bool) (*Template, error) {
	t := new(Template)
	q := visible(db.NewSelect().Model(t), orgID, userID).Where("id = ?", id)
	if forUpdate {
		q = sqldb.DialectOf(db).LockRows(q, "UPDATE")
	}
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrTemplateNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("select template: %w", err)
	}
	return t, nil
}

// Update changes a template userID may see: change receives the current
// template and returns the new one with its new files; the result is
// checked and written in the same transaction, and files no longer named are
// deleted. ENOTFOUND, EINVALID, ECONFLICT as Create, or change's error.
func (s *TemplateStore) Update(ctx context.Context, orgID, userID, id int64, change func(cur *Template) (*Template, []NewTemplateFile, error)) (*Template, error) {
	var out *Template
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		cur, err := s.get(ctx, tx, orgID, userID, id, true)
		if err != nil {
			return err
		}
		before, was := *cur, templateSnapshot(cur)
		next, files, err := change(cur)
		if err != nil {
			return err
		}
		next.ID, next.OrgID, next.CreatedBy, next.CreatedAt = before.ID, before.OrgID, before.CreatedBy, before.CreatedAt
		next.UpdatedAt = time.Now().UTC()
		if err := s.write(ctx, tx, next, &before, files); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model(next).WherePK().Exec(ctx); err != nil {
			return templateWriteError(err)
		}
		t := templateTarget(next)
		t.Changes = audit.Changes(was, templateSnapshot(next))
		if err := record(ctx, orgID, audit.TemplateUpdated, t); err != nil {
			return err
		}
		out = next
		return nil
	})
	return out, err
}

// write checks t (whose files may only be those of prev), stores its new
// files, deletes prev's files it dropped, and clears the default flag of
// the module's other templates when t is the default. It runs in tx.
func (s *TemplateStore) write(ctx context.Context, tx bun.Tx, t, prev *Template, files []NewTemplateFile) error {
	owned := map[int64]TemplateFileRef{}
	if prev != nil && prev.Mail != nil {
		for _, f := range append(append([]TemplateFileRef(nil), prev.Mail.Attachments...), prev.Mail.InlineImages...) {
			owned[f.ID] = f
		}
	}
	if err := ValidateTemplate(t, owned, files); err != nil {
		return err
	}
	for _, f := range files {
		blob, err := s.blobs.PutIn(ctx, tx, t.OrgID, f.Name, f.ContentType, bytes.NewReader(f.Data), TemplateLimits.MaxAttachmentSize)
		if err != nil {
			return err
		}
		ref := TemplateFileRef{ID: blob.ID, Name: f.Name}
		if f.Inline {
			t.Mail.InlineImages = append(t.Mail.InlineImages, ref)
		} else {
			t.Mail.Attachments = append(t.Mail.Attachments, ref)
		}
	}
	kept := map[int64]bool{}
	for _, id := range t.FileIDs() {
		kept[id] = true
	}
	for id := range owned {
		if !kept[id] {
			if err := s.blobs.DeleteIn(ctx, tx, t.OrgID, id); err != nil {
				return err
			}
		}
	}
	if t.IsDefault {
		var cleared []Template
		err := tx.NewUpdate().Model((*Template)(nil)).Set("is_default = ?", false).
			Where("org_id = ? AND module = ? AND id <> ? AND is_default", t.OrgID, t.Module, t.ID).
			Returning("id, name").Scan(ctx, &cleared)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("clear default template: %w", err)
		}
		// The template that was the module's default is not any more.
		for i := range cleared {
			c := templateTarget(&cleared[i])
			c.Changes = []models.FieldChange{{Field: "is_default", Old: true, New: false}}
			if err := record(ctx, t.OrgID, audit.TemplateUpdated, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete removes a template userID may see, and its files. ENOTFOUND when
// missing; ECONFLICT while a notification schedule uses it.
func (s *TemplateStore) Delete(ctx context.Context, orgID, userID, id int64) error {
	return sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		t, err := s.get(ctx, tx, orgID, userID, id, true)
		if err != nil {
			return err
		}
		var names []string
		err = tx.NewSelect().Table("notification_schedules").Column("name").
			Where("org_id = ? AND template_id = ?", orgID, id).OrderExpr("name").Limit(5).Scan(ctx, &names)
		if err != nil {
			return fmt.Errorf("select schedules of template: %w", err)
		}
		if len(names) > 0 {
			return &models.Error{Code: models.ECONFLICT, Title: "Template In Use", Detail: fmt.Sprintf("the template is used by notification schedule(s) %q; change or delete them first", names)}
		}
		if _, err := tx.NewDelete().Model((*Template)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("delete template: %w", err)
		}
		if err := record(ctx, orgID, audit.TemplateDeleted, templateTarget(t)); err != nil {
			return err
		}
		for _, fid := range t.FileIDs() {
			if err := s.blobs.DeleteIn(ctx, tx, orgID, fid); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadFile returns the bytes and content type of a file of t.
func (s *TemplateStore) ReadFile(ctx context.Context, t *Template, id int64) ([]byte, string, error) {
	r, blob, err := s.blobs.Open(ctx, t.OrgID, id, 0)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = r.Close() }() // only read: a failed close loses nothing
	data, err := io.ReadAll(io.LimitReader(r, TemplateLimits.MaxAttachmentSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("read template file %d: %w", id, err)
	}
	return data, blob.ContentType, nil
}

// templateWriteError turns a unique violation on the name into ECONFLICT.
func templateWriteError(err error) error {
	if sqldb.IsUniqueViolation(err) {
		return &models.Error{Code: models.ECONFLICT, Field: "name", Detail: "a notification template with this name exists"}
	}
	return fmt.Errorf("write template: %w", err)
}
