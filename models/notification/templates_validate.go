package notification

import (
	"fmt"
	"iam/models"
	"mime"
	"net/mail"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// phonePattern is a phone number: an optional +, then 6 to 15 digits
// (E.164 allows 15).
var phonePattern = regexp.MustCompile(`^\+?[0-9]{6,15}$`)

// macroPattern finds %macro% placeholders, as notify renders them.
var macroPattern = regexp.MustCompile(`%([A-Za-z0-9_]+)%`)

// ValidateTemplate checks t against TemplateLimits and the module's
// configuration, and writes its values in canonical form (module name,
// severity and recipient macros in their stored case, a missing share type
// as ALL). owned are the files t may name (its own, on update); files are
// the files arriving with the request. Every broken rule is a cause of the
// EINVALID error returned; the first is its field and detail.
func ValidateTemplate(t *Template, owned map[int64]TemplateFileRef, files []NewTemplateFile) error {
	var p models.Problems
	lim := TemplateLimits
	t.Name = strings.TrimSpace(t.Name)
	switch n := utf8.RuneCountInString(t.Name); {
	case n == 0:
		p.Add("name", "is required")
	case n > lim.MaxTemplateNameSize:
		p.Add("name", "must be at most %d characters", lim.MaxTemplateNameSize)
	case !templateNamePattern.MatchString(t.Name):
		p.Add("name", "must match %s", lim.TemplateNameRegex)
	}
	if utf8.RuneCountInString(t.Description) > lim.MaxTemplateDescSize {
		p.Add("description", "must be at most %d characters", lim.MaxTemplateDescSize)
	}
	switch strings.ToUpper(strings.TrimSpace(t.ShareType)) {
	case "", ShareAll:
		t.ShareType = ShareAll
	case ShareSelf:
		t.ShareType = ShareSelf
	default:
		p.Add("share_type", "must be one of: %s, %s", ShareAll, ShareSelf)
	}
	module, ok := canonicalModule(t.Module)
	if !ok {
		p.Add("module", "must be one of: %s", strings.Join(TemplateModuleNames(), ", "))
	}
	t.Module = module
	cfg := moduleConfigs[module]

	if t.Mail == nil && t.SMS == nil {
		p.Add("mail", "a template needs mail, sms or both")
	}
	if t.Mail != nil {
		validateMail(&p, t.Mail, cfg, ok, owned, files)
	} else if len(files) > 0 {
		p.Add(files[0].Field, "files need a mail part")
	}
	if t.SMS != nil {
		validateSMS(&p, t.SMS, cfg, ok)
	}
	return p.Result()
}

func validateMail(p *models.Problems, m *MailTemplate, cfg TemplateModuleConfig, moduleKnown bool, owned map[int64]TemplateFileRef, files []NewTemplateFile) {
	lim := TemplateLimits
	if len(m.To)+len(m.Cc) > lim.MaxToCcSize {
		p.Add("mail.to", "to and cc together must have at most %d entries", lim.MaxToCcSize)
	}
	m.To = recipients(p, "mail.to", m.To, checkAddress)
	m.Cc = recipients(p, "mail.cc", m.Cc, checkAddress)
	switch n := utf8.RuneCountInString(m.Subject); {
	case strings.TrimSpace(m.Subject) == "":
		p.Add("mail.subject", "is required")
	case n > lim.MaxMailSubjectSize:
		p.Add("mail.subject", "must be at most %d characters", lim.MaxMailSubjectSize)
	case strings.ContainsAny(m.Subject, "\r\n"):
		p.Add("mail.subject", "must be one line")
	}
	switch n := utf8.RuneCountInString(m.Content); {
	case strings.TrimSpace(m.Content) == "":
		p.Add("mail.content", "is required")
	case n > lim.MaxMailContentSize:
		p.Add("mail.content", "must be at most %d characters", lim.MaxMailContentSize)
	}
	if moduleKnown {
		checkMacros(p, "mail.subject", m.Subject, cfg, false)
		checkMacros(p, "mail.content", m.Content, cfg, true)
	}
	switch strings.ToUpper(strings.TrimSpace(m.Severity)) {
	case "", "MEDIUM":
		m.Severity = "MEDIUM"
	case "LOW", "HIGH":
		m.Severity = strings.ToUpper(strings.TrimSpace(m.Severity))
	default:
		p.Add("mail.severity", "must be one of: LOW, MEDIUM, HIGH")
	}
	// Files named by id must be the template's own.
	seen := map[int64]bool{}
	checkRefs := func(field string, refs []TemplateFileRef, images bool) []TemplateFileRef {
		out := make([]TemplateFileRef, 0, len(refs))
		for i, r := range refs {
			f, ok := owned[r.ID]
			switch {
			case !ok:
				p.Add(fmt.Sprintf("%s[%d]", field, i), "names no file of this template")
			case seen[r.ID]:
				p.Add(fmt.Sprintf("%s[%d]", field, i), "names a file already listed")
			default:
				seen[r.ID] = true
				out = append(out, f)
				if images && !isImageName(f.Name) {
					p.Add(fmt.Sprintf("%s[%d]", field, i), "must be an image (PNG, JPEG, GIF)")
				}
			}
		}
		return out
	}
	m.Attachments = checkRefs("mail.attachments", m.Attachments, false)
	m.InlineImages = checkRefs("mail.inline_images", m.InlineImages, true)
	if n := len(m.Attachments) + len(m.InlineImages) + len(files); n > lim.MaxAttachmentCount {
		p.Add("mail.attachments", "a template may have at most %d files", lim.MaxAttachmentCount)
	}
	allowed := strings.Split(cfg.FileUploadExtension, ",")
	for _, f := range files {
		ext := strings.ToUpper(strings.TrimPrefix(path.Ext(f.Name), "."))
		switch {
		case strings.TrimSpace(f.Name) == "" || strings.ContainsAny(f.Name, "/\\\r\n"):
			p.Add(f.Field, "needs a file name without slashes")
		case moduleKnown && !slices.Contains(allowed, ext):
			p.Add(f.Field, "the file type must be one of: %s", cfg.FileUploadExtension)
		case int64(len(f.Data)) > lim.MaxAttachmentSize:
			p.Add(f.Field, "the file must be at most %d bytes", lim.MaxAttachmentSize)
		case f.Inline && !isImageName(f.Name):
			p.Add(f.Field, "must be an image (PNG, JPEG, GIF)")
		}
		if _, _, err := mime.ParseMediaType(f.ContentType); err != nil {
			p.Add(f.Field, "has no valid content type")
		}
	}
}

func validateSMS(p *models.Problems, s *SMSTemplate, cfg TemplateModuleConfig, moduleKnown bool) {
	lim := TemplateLimits
	if len(s.To) > lim.MaxSMSNumberCount {
		p.Add("sms.to", "must have at most %d numbers", lim.MaxSMSNumberCount)
	}
	s.To = recipients(p, "sms.to", s.To, checkPhone)
	switch n := utf8.RuneCountInString(s.Content); {
	case strings.TrimSpace(s.Content) == "":
		p.Add("sms.content", "is required")
	case n > lim.MaxSMSContentSize:
		p.Add("sms.content", "must be at most %d characters", lim.MaxSMSContentSize)
	}
	if moduleKnown {
		checkMacros(p, "sms.content", s.Content, cfg, false)
	}
}

// recipients checks each entry: a recipient macro (stored in its canonical
// case) or what check accepts.
func recipients(p *models.Problems, field string, list []string, check func(string) string) []string {
	out := make([]string, 0, len(list))
	for i, r := range list {
		r = strings.TrimSpace(r)
		if m, ok := recipientMacro(r); ok {
			out = append(out, m)
			continue
		}
		if why := check(r); why != "" {
			p.Add(fmt.Sprintf("%s[%d]", field, i), "%s", why)
			continue
		}
		out = append(out, r)
	}
	return out
}

func checkAddress(s string) string {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address == "" {
		return "must be a mail address or a recipient macro (SELF, Manager)"
	}
	return ""
}

func checkPhone(s string) string {
	if !phonePattern.MatchString(strings.NewReplacer(" ", "", "-", "").Replace(s)) {
		return "must be a phone number (+ and 6 to 15 digits) or a recipient macro (SELF, Manager)"
	}
	return ""
}

// checkMacros refuses %macros% the module does not know, and with
// mandatory set, content missing one of the module's mandatory macros.
func checkMacros(p *models.Problems, field, text string, cfg TemplateModuleConfig, mandatory bool) {
	known := map[string]bool{}
	for _, m := range cfg.ContentMacros {
		known[m.ServerValue] = true
	}
	for _, m := range macroPattern.FindAllString(text, -1) {
		if !known[m] {
			p.Add(field, "uses the unknown macro %s; the module's macros are %s", m, macroNames(cfg))
			return
		}
	}
	if mandatory {
		for _, m := range cfg.ContentMacros {
			if m.IsMandatory && !strings.Contains(text, m.ServerValue) {
				p.Add(field, "must contain the macro %s", m.ServerValue)
			}
		}
	}
}

func macroNames(cfg TemplateModuleConfig) string {
	names := make([]string, len(cfg.ContentMacros))
	for i, m := range cfg.ContentMacros {
		names[i] = m.ServerValue
	}
	return strings.Join(names, ", ")
}

func isImageName(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".gif":
		return true
	}
	return false
}
