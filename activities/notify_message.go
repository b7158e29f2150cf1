package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"iam/models"
	"iam/models/notification"
	"iam/models/store"
	"iam/notify"
)

// message renders a run's template for each recipient. It is built once
// per send step: texts compiled, files read.
type message struct {
	run         *notification.NotificationRun
	subject     notify.Text
	html        notify.Text
	sms         notify.Text
	wrap        string
	severity    notify.Severity
	attachments []notify.File
	inline      []notify.File
	base        map[string]string // macros every recipient shares
	summary     *summary          // the run's summary (a summary step only)
}

// newMessage compiles run's template and reads its files.
func newMessage(ctx context.Context, store *store.Store, run *notification.NotificationRun) (*message, error) {
	t := run.Template
	m := &message{run: run, base: map[string]string{}}
	cfg, ok := notification.TemplateModuleConfigs(t.Module)
	if ok {
		for _, macro := range cfg.ContentMacros { // macros without a value here render empty
			m.base[strings.Trim(macro.ServerValue, "%")] = ""
		}
		if cfg.IsHTMLWrapNeeded {
			m.wrap = cfg.HTMLWrap
		}
	}
	loc, err := time.LoadLocation(t.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	m.base["org_name"] = t.OrgName
	m.base["date"] = run.ScheduledAt.In(loc).Format("2006-01-02")
	if t.SMS != nil {
		m.sms = notify.Compile(t.SMS.Content)
	}
	if t.Mail == nil {
		return m, nil
	}
	m.subject = notify.Compile(t.Mail.Subject)
	m.html = notify.Compile(t.Mail.Content)
	m.severity, _ = notify.ParseSeverity(t.Mail.Severity)
	tpl := &notification.Template{OrgID: run.OrgID}
	read := func(ref notification.TemplateFileRef, inline bool) (notify.File, error) {
		data, ct, err := store.Templates.ReadFile(ctx, tpl, ref.ID)
		if err != nil {
			return notify.File{}, fmt.Errorf("read template file %d: %w", ref.ID, err)
		}
		f := notify.File{Name: ref.Name, ContentType: ct, Data: data}
		if inline {
			f.ContentID = models.FormatID(ref.ID)
		}
		return f, nil
	}
	for _, ref := range t.Mail.Attachments {
		f, err := read(ref, false)
		if err != nil {
			return nil, err
		}
		m.attachments = append(m.attachments, f)
	}
	for _, ref := range t.Mail.InlineImages {
		f, err := read(ref, true)
		if err != nil {
			return nil, err
		}
		m.inline = append(m.inline, f)
	}
	return m, nil
}

// values are the macro values for one recipient.
func (m *message) values(u *notification.Recipient) map[string]string {
	v := make(map[string]string, len(m.base)+6)
	for k, x := range m.base {
		v[k] = x
	}
	v["display_name"] = u.Name()
	v["first_name"] = u.FirstName
	v["last_name"] = u.LastName
	v["email"] = u.Email
	v["mobile_number"] = u.MobileNumber
	return v
}

// deliveryKey identifies a delivery everywhere it travels (Message-ID, SMS
// reference): notification, scheduled time and recipient.
func deliveryKey(d *notification.Delivery) string {
	return fmt.Sprintf("n%d.%d.%s", d.NotificationID, d.ScheduledAt.Unix(), strings.ReplaceAll(d.Recipient, ":", "."))
}

// mail renders the mail of delivery d to u.
func (m *message) mail(d *notification.Delivery, u *notification.Recipient) *notify.Message {
	v := m.values(u)
	return &notify.Message{
		To:          []string{d.Address},
		Subject:     m.subject.Render(v, false),
		HTML:        notify.Wrap(m.wrap, m.html.Render(v, true)),
		Severity:    m.severity,
		Inline:      m.inline,
		Attachments: m.attachments,
		MessageID:   deliveryKey(d) + "@iam",
		Headers: map[string]string{
			"X-Iam-Notification": models.FormatID(d.NotificationID),
			"X-Iam-Run":          models.FormatID(d.RunID),
		},
	}
}

// text renders the SMS of delivery d to u.
func (m *message) text(d *notification.Delivery, u *notification.Recipient) notify.SMS {
	return notify.SMS{To: d.Address, Body: m.sms.Render(m.values(u), false), Reference: deliveryKey(d)}
}
