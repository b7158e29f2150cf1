package notification_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/listing"
	"iam/models/modeltest"
	"iam/models/notification"
	"iam/models/store"
)

func mailTemplate(name string) *notification.Template {
	return &notification.Template{
		Name:   name,
		Module: "reports",
		Mail:   &notification.MailTemplate{To: []string{"self", "ops@example.com"}, Subject: "Hello %display_name%", Content: "<p>Hi %first_name%</p>", Severity: "high"},
	}
}

func fieldOf(err error) string {
	var e *models.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

func TestTemplateStore_CreateGetList(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		const alice, bob = 11, 22

		tpl := mailTemplate("Welcome")
		tpl.OrgID, tpl.CreatedBy = org.ID, alice
		if err := store.Templates.Create(ctx, tpl, nil); err != nil {
			t.Fatal(err)
		}
		// Stored in canonical form.
		got, err := store.Templates.Get(ctx, org.ID, bob, tpl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Module != "Reports" || got.ShareType != "ALL" || got.Mail.Severity != "HIGH" || got.Mail.To[0] != "SELF" || got.SMS != nil {
			t.Errorf("stored %+v mail %+v", got, got.Mail)
		}

		private := &notification.Template{OrgID: org.ID, CreatedBy: alice, Name: "Mine", ShareType: "self", Module: "Orchestration",
			SMS: &notification.SMSTemplate{To: []string{"+14155550100"}, Content: "%workflow_name% done"}}
		if err := store.Templates.Create(ctx, private, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Templates.Get(ctx, org.ID, bob, private.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another user's SELF template: %v", err)
		}
		other := modeltest.NewOrg(t, store)
		if _, err := store.Templates.Get(ctx, other.ID, alice, tpl.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("another organization's template: %v", err)
		}

		dup := mailTemplate("WELCOME")
		dup.OrgID = org.ID
		if err := store.Templates.Create(ctx, dup, nil); models.ErrorCode(err) != models.ECONFLICT {
			t.Errorf("duplicate name (other case): %v", err)
		}

		list := func(user int64, query string) []notification.Template {
			q, _ := url.ParseQuery(query)
			p, err := listing.Parse(q, notification.TemplateListing)
			if err != nil {
				t.Fatal(err)
			}
			out, meta, err := store.Templates.List(ctx, org.ID, user, p)
			if err != nil {
				t.Fatal(err)
			}
			if m := meta.(*listing.OffsetMeta); m.Total != int64(len(out)) {
				t.Errorf("total %d for %d rows", m.Total, len(out))
			}
			return out
		}
		if got := list(alice, ""); len(got) != 2 || got[0].Name != "Mine" {
			t.Errorf("alice sees %d", len(got))
		}
		if got := list(bob, ""); len(got) != 1 {
			t.Errorf("bob sees %d, want only the shared one", len(got))
		}
		if got := list(alice, `filter=module eq "Reports" and name sw "wel"`); len(got) != 1 || got[0].ID != tpl.ID {
			t.Errorf("filter on module and name: %v", got)
		}
	})
}

func TestTemplateStore_DefaultIsExclusive(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		var ids []int64
		for i := range 2 {
			tpl := mailTemplate(fmt.Sprintf("T%d", i))
			tpl.OrgID, tpl.IsDefault = org.ID, true
			if err := store.Templates.Create(ctx, tpl, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tpl.ID)
		}
		first, _ := store.Templates.Get(ctx, org.ID, 0, ids[0])
		second, _ := store.Templates.Get(ctx, org.ID, 0, ids[1])
		if first.IsDefault || !second.IsDefault {
			t.Errorf("defaults: %v %v; only the newest should be", first.IsDefault, second.IsDefault)
		}
	})
}

func TestTemplateStore_Files(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		store := store.NewStore(db)
		org := modeltest.NewOrg(t, store)
		tpl := mailTemplate("With files")
		tpl.OrgID = org.ID
		files := []notification.NewTemplateFile{
			{Name: "guide.pdf", ContentType: "application/pdf", Data: []byte("%PDF"), Field: "mail.attachments[0]"},
			{Name: "logo.png", ContentType: "image/png", Data: []byte("PNG"), Field: "mail.attachments[1]"},
		}
		if err := store.Templates.Create(ctx, tpl, files); err != nil {
			t.Fatal(err)
		}
		if len(tpl.Mail.Attachments) != 2 {
			t.Fatalf("attachments %+v", tpl.Mail.Attachments)
		}
		pdf, logo := tpl.Mail.Attachments[0], tpl.Mail.Attachments[1]
		data, ct, err := store.Templates.ReadFile(ctx, tpl, pdf.ID)
		if err != nil || string(data) != "%PDF" || ct != "application/pdf" {
			t.Fatalf("ReadFile = %q %q %v", data, ct, err)
		}

		// The logo becomes inline only; the PDF is dropped and its blob deleted.
		updated, err := store.Templates.Update(ctx, org.ID, 0, tpl.ID, func(cur *notification.Template) (*notification.Template, []notification.NewTemplateFile, error) {
			next := *cur
			mail := *cur.Mail
			mail.Attachments = nil
			mail.InlineImages = []notification.TemplateFileRef{{ID: logo.ID}}
			next.Mail = &mail
			return &next, nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(updated.Mail.Attachments) != 0 || len(updated.Mail.InlineImages) != 1 || updated.Mail.InlineImages[0].Name != "logo.png" {
			t.Errorf("after update: %+v", updated.Mail)
		}
		if _, _, err := store.Templates.ReadFile(ctx, updated, pdf.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("dropped file still readable: %v", err)
		}

		// A file of another template cannot be named.
		other := mailTemplate("Other")
		other.OrgID = org.ID
		other.Mail.Attachments = []notification.TemplateFileRef{{ID: logo.ID}}
		if err := store.Templates.Create(ctx, other, nil); fieldOf(err) != "mail.attachments[0]" {
			t.Errorf("naming another template's file: %v", err)
		}

		if err := store.Templates.Delete(ctx, org.ID, 0, tpl.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.Templates.ReadFile(ctx, updated, logo.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("files outlive their template: %v", err)
		}
		if err := store.Templates.Delete(ctx, org.ID, 0, tpl.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("second delete: %v", err)
		}
	})
}

func TestValidateTemplate_Limits(t *testing.T) {
	lim := notification.TemplateLimits
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name   string
		change func(*notification.Template)
		field  string
	}{
		{"name too long", func(t *notification.Template) { t.Name = long(lim.MaxTemplateNameSize + 1) }, "name"},
		{"name at the limit", func(t *notification.Template) { t.Name = long(lim.MaxTemplateNameSize) }, ""},
		{"name breaks the regex", func(t *notification.Template) { t.Name = "-bad/name" }, "name"},
		{"description too long", func(t *notification.Template) { t.Description = long(lim.MaxTemplateDescSize + 1) }, "description"},
		{"mail content too long", func(t *notification.Template) { t.Mail.Content = long(lim.MaxMailContentSize + 1) }, "mail.content"},
		{"mail content at the limit", func(t *notification.Template) { t.Mail.Content = long(lim.MaxMailContentSize) }, ""},
		{"too many to and cc", func(t *notification.Template) {
			t.Mail.To = nil
			for i := range lim.MaxToCcSize + 1 {
				t.Mail.Cc = append(t.Mail.Cc, fmt.Sprintf("u%d@example.com", i))
			}
		}, "mail.to"},
		{"bad address", func(t *notification.Template) { t.Mail.Cc = []string{"x@example.com", "nope"} }, "mail.cc[1]"},
		{"sms content too long", func(t *notification.Template) {
			t.SMS = &notification.SMSTemplate{Content: long(lim.MaxSMSContentSize + 1)}
		}, "sms.content"},
		{"too many numbers", func(t *notification.Template) {
			t.SMS = &notification.SMSTemplate{Content: "x"}
			for range lim.MaxSMSNumberCount + 1 {
				t.SMS.To = append(t.SMS.To, "+14155550100")
			}
		}, "sms.to"},
		{"bad number", func(t *notification.Template) { t.SMS = &notification.SMSTemplate{Content: "x", To: []string{"12ab"}} }, "sms.to[0]"},
		{"unknown macro", func(t *notification.Template) { t.Mail.Content = "Hi %nickname%" }, "mail.content"},
		{"macro of another module", func(t *notification.Template) { t.Mail.Subject = "%workflow_name%" }, "mail.subject"},
		{"percent that is no macro", func(t *notification.Template) { t.Mail.Content = "50% off, 100 %" }, ""},
		{"no part", func(t *notification.Template) { t.Mail = nil }, "mail"},
		{"unknown module", func(t *notification.Template) { t.Module = "Billing" }, "module"},
		{"bad severity", func(t *notification.Template) { t.Mail.Severity = "urgent" }, "mail.severity"},
		{"bad share type", func(t *notification.Template) { t.ShareType = "TEAM" }, "share_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := mailTemplate("Valid")
			tc.change(tpl)
			err := notification.ValidateTemplate(tpl, nil, nil)
			if got := fieldOf(err); got != tc.field {
				t.Errorf("field %q (%v), want %q", got, err, tc.field)
			}
		})
	}
	tpl := mailTemplate("Files")
	files := []notification.NewTemplateFile{
		{Name: "run.exe", ContentType: "application/octet-stream", Field: "mail.attachments[0]"},
		{Name: "big.pdf", ContentType: "application/pdf", Data: make([]byte, lim.MaxAttachmentSize+1), Field: "mail.attachments[1]"},
	}
	var e *models.Error
	if err := notification.ValidateTemplate(tpl, nil, files); !errors.As(err, &e) || len(e.Causes) != 2 || e.Field != "mail.attachments[0]" {
		t.Errorf("bad files: %+v", err)
	}
}
