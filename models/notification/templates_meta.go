package notification

import (
	"regexp"
	"strings"
)

// The metadata of notification templates (spec 4.7). This file is the one
// source of truth for both GET /meta/templates/notification/* and the checks
// of ValidateTemplate: the limits served are the limits applied.

// Template modules (spec 2.18).
const (
	ModuleReports       = "Reports"
	ModuleOrchestration = "Orchestration"
)

// Share types of a template: ALL is seen by the whole organization, SELF by
// its creator only.
const (
	ShareAll  = "ALL"
	ShareSelf = "SELF"
)

// TemplateLimitSet holds the limits of template fields. Sizes count
// characters (Unicode code points).
type TemplateLimitSet struct {
	MaxMailContentSize  int `json:"max_mail_content_size"`
	MaxSMSContentSize   int `json:"max_sms_content_size"`
	MaxTemplateNameSize int `json:"max_template_name_size"`
	MaxTemplateDescSize int `json:"max_template_desc_size"`
	// MaxToCcSize bounds the to and cc entries of mail together.
	MaxToCcSize       int `json:"max_to_cc_size"`
	MaxSMSNumberCount int `json:"max_sms_number_count"`
	// TemplateNameRegex is the pattern a name must match, written so that
	// both RE2 (Go) and ECMAScript read it alike.
	TemplateNameRegex string `json:"template_name_regex"`
	// The service's additions: the subject, and the files of a template.
	MaxMailSubjectSize int   `json:"max_mail_subject_size"`
	MaxAttachmentCount int   `json:"max_attachment_count"`
	MaxAttachmentSize  int64 `json:"max_attachment_size"`
}

// TemplateLimits are the limits every template is checked against.
var TemplateLimits = TemplateLimitSet{
	MaxMailContentSize:  100000,
	MaxSMSContentSize:   800,
	MaxTemplateNameSize: 100,
	MaxTemplateDescSize: 500,
	MaxToCcSize:         50,
	MaxSMSNumberCount:   10,
	TemplateNameRegex:   `^[A-Za-z0-9][A-Za-z0-9 _.,()&-]*$`,
	MaxMailSubjectSize:  250,
	MaxAttachmentCount:  5,
	MaxAttachmentSize:   2 << 20,
}

var templateNamePattern = regexp.MustCompile(TemplateLimits.TemplateNameRegex)

// MetaOption is one choice offered to clients: the value the server stores
// and the label a client shows.
type MetaOption struct {
	ServerValue string `json:"server_value"`
	ClientValue string `json:"client_value"`
}

// RecipientMacro stands for recipients resolved when a notification is
// sent (SELF: the user concerned; Manager: that user's manager).
type RecipientMacro struct {
	ServerValue string `json:"server_value"`
	ClientValue string `json:"client_value"`
	MacroType   string `json:"macro_type"`
	IsMandatory bool   `json:"is_mandatory"`
}

// ContentMacro is a %name% placeholder a module's content may use.
type ContentMacro struct {
	ServerValue string `json:"server_value"`
	ClientValue string `json:"client_value"`
	IsMandatory bool   `json:"is_mandatory"`
}

// TemplateDefaultConfigs is the body of default_configs.
type TemplateDefaultConfigs struct {
	Modes              []MetaOption                `json:"modes"`
	Modules            []MetaOption                `json:"modules"`
	MailSeverity       []MetaOption                `json:"mail_severity"`
	AttachmentFormats  []MetaOption                `json:"attachment_formats"`
	MailRcptMacrosList map[string][]RecipientMacro `json:"mail_rcpt_macros_list"`
	SMSRcptMacrosList  map[string][]RecipientMacro `json:"sms_rcpt_macros_list"`
	EditorOptions      []string                    `json:"editor_options"`
	TemplateLimitSet
	HideAddRemoveColumn bool `json:"hide_add_remove_column"`
	SortedColIconOnly   bool `json:"sorted_col_icon_only"`
}

// TemplateModuleConfig is the body of module_configs for one module.
type TemplateModuleConfig struct {
	// FileUploadExtension lists the extensions a template's files may
	// have, comma-separated, upper case.
	FileUploadExtension        string         `json:"file_upload_extension"`
	DefaultMailContent         string         `json:"default_mail_content"`
	DefaultSMSContent          string         `json:"default_sms_content"`
	DefaultMailSubject         string         `json:"default_mail_subject"`
	HTMLWrap                   string         `json:"html_wrap"`
	ContentMacros              []ContentMacro `json:"content_macros"`
	ShowPriority               bool           `json:"show_priority"`
	ShowMailRcptMacrosList     bool           `json:"show_mail_rcpt_macros_list"`
	ShowSMSRcptMacrosList      bool           `json:"show_sms_rcpt_macros_list"`
	ShowModuleSMSContentMacros bool           `json:"show_module_sms_content_macros"`
	IsSMSContentDisabled       bool           `json:"is_sms_content_disabled"`
	IsHTMLWrapNeeded           bool           `json:"is_html_wrap_needed"`
	ShowEditorModes            bool           `json:"show_editor_modes"`
}

// recipientMacros are the recipient macros of every module.
var recipientMacros = []RecipientMacro{
	{ServerValue: "SELF", ClientValue: "Self", MacroType: "recipient"},
	{ServerValue: "Manager", ClientValue: "Manager", MacroType: "recipient"},
}

// userMacros are the content macros about the recipient, filled on every send.
var userMacros = []ContentMacro{
	{ServerValue: "%display_name%", ClientValue: "Display Name"},
	{ServerValue: "%first_name%", ClientValue: "First Name"},
	{ServerValue: "%last_name%", ClientValue: "Last Name"},
	{ServerValue: "%email%", ClientValue: "Email Address"},
	{ServerValue: "%mobile_number%", ClientValue: "Mobile Number"},
	{ServerValue: "%org_name%", ClientValue: "Organization Name"},
	{ServerValue: "%date%", ClientValue: "Date"},
}

// htmlWrap frames mail content; {{body}} is where the content goes.
const htmlWrap = `<!DOCTYPE html><html><head><meta charset="utf-8"></head>` +
	`<body style="margin:0;padding:24px;background:#f5f6f8;font-family:Arial,Helvetica,sans-serif;font-size:14px;color:#222">` +
	`<div style="max-width:640px;margin:0 auto;background:#fff;padding:24px;border-radius:6px">{{body}}</div></body></html>`

// moduleConfigs is module_configs for each module.
var moduleConfigs = map[string]TemplateModuleConfig{
	ModuleReports: {
		FileUploadExtension: "PDF,CSV,XLS,XLSX,HTML,TXT,PNG,JPG,JPEG,GIF",
		DefaultMailSubject:  "%report_name% report",
		DefaultMailContent:  "<p>Hello %display_name%,</p><p>The report %report_name% generated on %generated_time% is ready: %report_link%</p>",
		DefaultSMSContent:   "Report %report_name% is ready: %report_link%",
		HTMLWrap:            htmlWrap,
		ContentMacros: append(append([]ContentMacro(nil), userMacros...),
			ContentMacro{ServerValue: "%report_name%", ClientValue: "Report Name"},
			ContentMacro{ServerValue: "%report_link%", ClientValue: "Report Link"},
			ContentMacro{ServerValue: "%generated_time%", ClientValue: "Generated Time"},
		),
		ShowPriority: true, ShowMailRcptMacrosList: true, ShowSMSRcptMacrosList: true,
		ShowModuleSMSContentMacros: true, IsHTMLWrapNeeded: true, ShowEditorModes: true,
	},
	ModuleOrchestration: {
		FileUploadExtension: "PDF,CSV,TXT,PNG,JPG,JPEG,GIF",
		DefaultMailSubject:  "Action needed: %workflow_name%",
		DefaultMailContent:  "<p>Hello %display_name%,</p><p>%workflow_name% needs your attention (status: %action_status%).</p>",
		DefaultSMSContent:   "%workflow_name%: %action_status%",
		HTMLWrap:            htmlWrap,
		ContentMacros: append(append([]ContentMacro(nil), userMacros...),
			ContentMacro{ServerValue: "%workflow_name%", ClientValue: "Workflow Name"},
			ContentMacro{ServerValue: "%action_status%", ClientValue: "Action Status"},
		),
		ShowPriority: true, ShowMailRcptMacrosList: true, ShowSMSRcptMacrosList: true,
		ShowModuleSMSContentMacros: true, IsHTMLWrapNeeded: true, ShowEditorModes: true,
	},
}

// TemplateDefaults returns default_configs.
func TemplateDefaults() TemplateDefaultConfigs {
	macros := func() map[string][]RecipientMacro {
		return map[string][]RecipientMacro{
			"orchestration": append([]RecipientMacro(nil), recipientMacros...),
			"reports":       append([]RecipientMacro(nil), recipientMacros...),
		}
	}
	return TemplateDefaultConfigs{
		Modes: []MetaOption{
			{ServerValue: "Email", ClientValue: "Email"},
			{ServerValue: "SMS", ClientValue: "SMS"},
			{ServerValue: "Email_and_SMS", ClientValue: "Email and SMS"},
		},
		Modules: []MetaOption{
			{ServerValue: ModuleReports, ClientValue: ModuleReports},
			{ServerValue: ModuleOrchestration, ClientValue: ModuleOrchestration},
		},
		MailSeverity: []MetaOption{
			{ServerValue: "Low", ClientValue: "Low"},
			{ServerValue: "Medium", ClientValue: "Medium"},
			{ServerValue: "High", ClientValue: "High"},
		},
		AttachmentFormats:  []MetaOption{{ServerValue: "PDF", ClientValue: "PDF"}},
		MailRcptMacrosList: macros(),
		SMSRcptMacrosList:  macros(),
		EditorOptions:      []string{"rtEditor", "plainText"},
		TemplateLimitSet:   TemplateLimits,
	}
}

// TemplateModuleConfigs returns module_configs of module (matched in any
// case), and false for a module that does not exist.
func TemplateModuleConfigs(module string) (TemplateModuleConfig, bool) {
	name, ok := canonicalModule(module)
	if !ok {
		return TemplateModuleConfig{}, false
	}
	cfg := moduleConfigs[name]
	cfg.ContentMacros = append([]ContentMacro(nil), cfg.ContentMacros...)
	return cfg, true
}

// TemplateModuleNames lists the modules.
func TemplateModuleNames() []string { return []string{ModuleReports, ModuleOrchestration} }

// canonicalModule returns a module's name as stored.
func canonicalModule(module string) (string, bool) {
	for _, m := range TemplateModuleNames() {
		if strings.EqualFold(m, strings.TrimSpace(module)) {
			return m, true
		}
	}
	return "", false
}

// recipientMacro returns the canonical recipient macro s names, if any.
func recipientMacro(s string) (string, bool) {
	for _, m := range recipientMacros {
		if strings.EqualFold(m.ServerValue, strings.TrimSpace(s)) {
			return m.ServerValue, true
		}
	}
	return "", false
}
