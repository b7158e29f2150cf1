package api

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/listing"
	"iam/models/notification"
	"iam/notify"
)

// templateMaxBody is the body limit of template writes: room for every file
// a template may hold, base64-encoded in data: URIs, and the rest.
var templateMaxBody = int64(notification.TemplateLimits.MaxAttachmentCount)*notification.TemplateLimits.MaxAttachmentSize*4/3 + 1<<20

// templateView is a notification template as the API shows it (spec 2.18).
type templateView struct {
	ID             string                              `json:"id"`
	Name           string                              `json:"name"`
	Description    string                              `json:"description"`
	ShareType      string                              `json:"share_type"`
	Module         string                              `json:"module"`
	IsDefault      bool                                `json:"is_default"`
	Configurations notification.TemplateConfigurations `json:"configurations"`
	Mail           *mailView                           `json:"mail,omitempty"`
	SMS            *smsView                            `json:"sms,omitempty"`
}

type mailView struct {
	To           []string   `json:"to"`
	Cc           []string   `json:"cc"`
	Subject      string     `json:"subject"`
	Content      string     `json:"content"`
	Severity     string     `json:"severity"`
	Attachments  []fileView `json:"attachments"`
	InlineImages []string   `json:"inline_images"`
	// InlineImageFiles is the full form of the inline images (include=files).
	InlineImageFiles []fileView `json:"inline_image_files,omitempty"`
}

type smsView struct {
	To      []string `json:"to"`
	Content string   `json:"content"`
}

// fileView is a template's file; File, its data: URI, only in the full form.
type fileView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	File string `json:"file,omitempty"`
}

func newTemplateView(t *notification.Template) templateView {
	v := templateView{
		ID: models.FormatID(t.ID), Name: t.Name, Description: t.Description, ShareType: t.ShareType,
		Module: t.Module, IsDefault: t.IsDefault, Configurations: t.Configurations,
	}
	if m := t.Mail; m != nil {
		mv := &mailView{To: nonNil(m.To), Cc: nonNil(m.Cc), Subject: m.Subject, Content: m.Content, Severity: m.Severity,
			Attachments: []fileView{}, InlineImages: []string{}}
		for _, f := range m.Attachments {
			mv.Attachments = append(mv.Attachments, fileView{ID: models.FormatID(f.ID), Name: f.Name})
		}
		for _, f := range m.InlineImages {
			mv.InlineImages = append(mv.InlineImages, models.FormatID(f.ID))
		}
		v.Mail = mv
	}
	if s := t.SMS; s != nil {
		v.SMS = &smsView{To: nonNil(s.To), Content: s.Content}
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// templateRequest is the body of POST, and of PATCH once merged over the
// current template. The rules beyond shape are models.ValidateTemplate's.
type templateRequest struct {
	Name           string                               `json:"name" validate:"required"`
	Description    string                               `json:"description"`
	ShareType      string                               `json:"share_type"`
	Module         string                               `json:"module" validate:"required"`
	IsDefault      bool                                 `json:"is_default"`
	Configurations *notification.TemplateConfigurations `json:"configurations"`
	Mail           *mailRequest                         `json:"mail"`
	SMS            *smsView                             `json:"sms"`
}

type mailRequest struct {
	To       []string `json:"to"`
	Cc       []string `json:"cc"`
	Subject  string   `json:"subject"`
	Content  string   `json:"content"`
	Severity string   `json:"severity"`
	// AttachmentIDs names files the template keeps as attachments.
	AttachmentIDs []string `json:"attachment_ids"`
	// Attachments adds files (file: a data: URI) or, with id alone, keeps one.
	Attachments  []fileView `json:"attachments"`
	InlineImages []string   `json:"inline_images"`
	// InlineImageFiles adds inline images (file: a data: URI).
	InlineImageFiles []fileView `json:"inline_image_files"`
}

// toModel turns the request into a template and its new files.
func (r *templateRequest) toModel() (*notification.Template, []notification.NewTemplateFile, error) {
	t := &notification.Template{Name: r.Name, Description: r.Description, ShareType: r.ShareType, Module: r.Module, IsDefault: r.IsDefault}
	if r.Configurations != nil {
		t.Configurations = *r.Configurations
	}
	if r.SMS != nil {
		t.SMS = &notification.SMSTemplate{To: r.SMS.To, Content: r.SMS.Content}
	}
	if r.Mail == nil {
		return t, nil, nil
	}
	m := r.Mail
	t.Mail = &notification.MailTemplate{To: m.To, Cc: m.Cc, Subject: m.Subject, Content: m.Content, Severity: m.Severity}
	var files []notification.NewTemplateFile
	ref := func(field, id string) (notification.TemplateFileRef, error) {
		n, err := models.ParseID(field, id)
		return notification.TemplateFileRef{ID: n}, err
	}
	for i, id := range m.AttachmentIDs {
		r, err := ref(fmt.Sprintf("mail.attachment_ids[%d]", i), id)
		if err != nil {
			return nil, nil, err
		}
		t.Mail.Attachments = append(t.Mail.Attachments, r)
	}
	for i, id := range m.InlineImages {
		r, err := ref(fmt.Sprintf("mail.inline_images[%d]", i), id)
		if err != nil {
			return nil, nil, err
		}
		t.Mail.InlineImages = append(t.Mail.InlineImages, r)
	}
	add := func(field string, list []fileView, inline bool) error {
		for i, f := range list {
			name := fmt.Sprintf("%s[%d]", field, i)
			if f.File == "" {
				if inline {
					return models.Invalid(name+".file", "is required")
				}
				r, err := ref(name+".id", f.ID)
				if err != nil {
					return err
				}
				t.Mail.Attachments = append(t.Mail.Attachments, r)
				continue
			}
			ct, data, err := notify.ParseDataURI(f.File)
			if err != nil {
				return models.Invalid(name+".file", "%v", err)
			}
			files = append(files, notification.NewTemplateFile{Name: f.Name, ContentType: ct, Data: data, Inline: inline, Field: name})
		}
		return nil
	}
	if err := add("mail.attachments", m.Attachments, false); err != nil {
		return nil, nil, err
	}
	if err := add("mail.inline_image_files", m.InlineImageFiles, true); err != nil {
		return nil, nil, err
	}
	return t, files, nil
}

// listTemplates: GET /templates/notification (offset paging; filter on
// name, module, share_type, is_default, description, id).
func (s *Server) listTemplates(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	params, err := listing.Parse(c.Request.URL.Query(), notification.TemplateListing)
	if err != nil {
		return err
	}
	list, meta, err := s.store.Templates.List(ctx, p.OrgID, p.UserID, params)
	if err != nil {
		return err
	}
	writeList(c, viewsOf(list, newTemplateView), params.Fields, meta)
	return nil
}

// createTemplate: POST /templates/notification, 201 with {data: template}.
func (s *Server) createTemplate(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	var req templateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	t, files, err := req.toModel()
	if err != nil {
		return err
	}
	t.OrgID, t.CreatedBy = p.OrgID, p.UserID
	if err := s.store.Templates.Create(ctx, t, files); err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"data": newTemplateView(t)})
	return nil
}

// getTemplate: GET /templates/notification/{template_id}; include=files
// adds each file's data: URI.
func (s *Server) getTemplate(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	id, err := pathID(c, "template_id", notification.ErrTemplateNotFound)
	if err != nil {
		return err
	}
	t, err := s.store.Templates.Get(ctx, p.OrgID, p.UserID, id)
	if err != nil {
		return err
	}
	view := newTemplateView(t)
	switch c.Query("include") {
	case "":
	case "files":
		if err := s.fillFiles(c, t, view.Mail); err != nil {
			return err
		}
	default:
		return &listing.ParamError{Param: "include", Detail: `must be "files"`}
	}
	c.JSON(http.StatusOK, gin.H{"data": view})
	return nil
}

// fillFiles writes the full form of a template's files into v.
func (s *Server) fillFiles(c *gin.Context, t *notification.Template, v *mailView) error {
	ctx := c.Request.Context()
	if v == nil {
		return nil
	}
	full := func(ref notification.TemplateFileRef) (fileView, error) {
		data, ct, err := s.store.Templates.ReadFile(ctx, t, ref.ID)
		if err != nil {
			return fileView{}, err
		}
		return fileView{ID: models.FormatID(ref.ID), Name: ref.Name, File: notify.DataURI(ct, data)}, nil
	}
	for i, ref := range t.Mail.Attachments {
		f, err := full(ref)
		if err != nil {
			return err
		}
		v.Attachments[i] = f
	}
	for _, ref := range t.Mail.InlineImages {
		f, err := full(ref)
		if err != nil {
			return err
		}
		v.InlineImageFiles = append(v.InlineImageFiles, f)
	}
	return nil
}

// updateTemplate: PATCH /templates/notification/{template_id}. The body is
// a JSON merge patch (RFC 7396) over the template as GET shows it: members
// given replace, null removes (sms: null drops the SMS part), objects merge.
// The result is checked as a whole, like a create.
func (s *Server) updateTemplate(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	id, err := pathID(c, "template_id", notification.ErrTemplateNotFound)
	if err != nil {
		return err
	}
	patch, err := decodePatch(c)
	if err != nil {
		return err
	}
	t, err := s.store.Templates.Update(ctx, p.OrgID, p.UserID, id, func(cur *notification.Template) (*notification.Template, []notification.NewTemplateFile, error) {
		req, mergeErr := mergeTemplate(cur, patch)
		if mergeErr != nil {
			return nil, nil, mergeErr
		}
		return req.toModel()
	})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": newTemplateView(t)})
	return nil
}

// mergeTemplate applies patch to the current template's view and reads the
// result as a create request. A mail patch naming attachment_ids without
// attachments replaces the attachments by those ids.
func mergeTemplate(cur *notification.Template, patch []byte) (*templateRequest, error) {
	var req templateRequest
	err := mergeRequest(newTemplateView(cur), patch, func(doc, patch map[string]any) {
		delete(doc, "id")
		mp, _ := patch["mail"].(map[string]any)
		cm, _ := doc["mail"].(map[string]any)
		if _, ids := mp["attachment_ids"]; ids && cm != nil {
			if _, atts := mp["attachments"]; !atts {
				delete(cm, "attachments")
			}
		}
	}, &req)
	if err != nil {
		return nil, err
	}
	return &req, nil
}

// deleteTemplate: DELETE /templates/notification/{template_id}, 204; 409
// while a notification schedule uses it.
func (s *Server) deleteTemplate(c *gin.Context) error {
	ctx := c.Request.Context()
	p := principal(c)
	id, err := pathID(c, "template_id", notification.ErrTemplateNotFound)
	if err != nil {
		return err
	}
	if err := s.store.Templates.Delete(ctx, p.OrgID, p.UserID, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
