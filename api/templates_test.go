package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/notification"
)

type templateBody struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	ShareType   string `json:"share_type"`
	Module      string `json:"module"`
	IsDefault   bool   `json:"is_default"`
	Mail        *struct {
		To          []string `json:"to"`
		Subject     string   `json:"subject"`
		Content     string   `json:"content"`
		Severity    string   `json:"severity"`
		Attachments []struct {
			ID, Name, File string
		} `json:"attachments"`
		InlineImages     []string `json:"inline_images"`
		InlineImageFiles []struct {
			ID, Name, File string
		} `json:"inline_image_files"`
	} `json:"mail"`
	SMS *struct {
		To      []string `json:"to"`
		Content string   `json:"content"`
	} `json:"sms"`
}

const templatesPath = "/api/v1/templates/notification"

func newTemplateBody(name string) map[string]any {
	return map[string]any{
		"name": name, "description": "sent to users who have not enrolled", "module": "Reports",
		"configurations": map[string]any{"attachment_settings_enabled": true},
		"mail": map[string]any{
			"to": []string{"SELF"}, "cc": []string{}, "subject": "Enrol, %first_name%",
			"content": "<p>Hello %display_name%</p>", "severity": "high",
		},
		"sms": map[string]any{"to": []string{"SELF"}, "content": "Enrol now, %first_name%"},
	}
}

func createTemplate(t *testing.T, env *apitest.Env, tok string, body map[string]any) templateBody {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: templatesPath, Token: tok, Body: body})
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST template: %d %s", resp.Status, resp.Body)
	}
	var out struct{ Data templateBody }
	resp.JSON(t, &out)
	return out.Data
}

func TestTemplates_CRUD(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.notification_template.all")
		pdf := "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4"))
		body := newTemplateBody("Enrollment reminder")
		body["mail"].(map[string]any)["attachments"] = []map[string]any{{"name": "guide.pdf", "file": pdf}}
		created := createTemplate(t, env, tok, body)
		if created.Module != "Reports" || created.ShareType != "ALL" || created.Mail.Severity != "HIGH" ||
			len(created.Mail.Attachments) != 1 || created.Mail.Attachments[0].Name != "guide.pdf" || created.SMS.Content != "Enrol now, %first_name%" {
			t.Fatalf("created %+v", created)
		}

		resp := env.Get(templatesPath+"/"+created.ID+"?include=files", tok)
		var got struct{ Data templateBody }
		resp.JSON(t, &got)
		if resp.Status != 200 || got.Data.Mail.Attachments[0].File != pdf {
			t.Fatalf("GET full form: %d %s", resp.Status, resp.Body)
		}

		// PATCH merges: a new subject, the SMS part dropped, the file kept.
		resp = env.Do(apitest.Request{Method: "PATCH", Path: templatesPath + "/" + created.ID, Token: tok,
			Body: map[string]any{"mail": map[string]any{"subject": "Last call"}, "sms": nil, "is_default": true}})
		var patched struct{ Data templateBody }
		resp.JSON(t, &patched)
		if resp.Status != 200 || patched.Data.Mail.Subject != "Last call" || patched.Data.SMS != nil ||
			!patched.Data.IsDefault || len(patched.Data.Mail.Attachments) != 1 || patched.Data.Mail.Content != "<p>Hello %display_name%</p>" {
			t.Fatalf("PATCH: %d %s", resp.Status, resp.Body)
		}
		// The attachment becomes an inline image only.
		fileID := patched.Data.Mail.Attachments[0].ID
		resp = env.Do(apitest.Request{Method: "PATCH", Path: templatesPath + "/" + created.ID, Token: tok,
			Body: map[string]any{"mail": map[string]any{"attachment_ids": []string{}, "inline_images": []string{fileID}}}})
		resp.JSON(t, &patched)
		if resp.Status != 400 { // a PDF is no image
			t.Fatalf("PDF as inline image: %d %s", resp.Status, resp.Body)
		}

		resp = env.Do(apitest.Request{Method: "DELETE", Path: templatesPath + "/" + created.ID, Token: tok})
		if resp.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Get(templatesPath+"/"+created.ID, tok); resp.Status != 404 || resp.ErrorBody(t).Title != "Template Not Found" {
			t.Errorf("GET deleted: %d %s", resp.Status, resp.Body)
		}
		if resp := env.Do(apitest.Request{Method: "DELETE", Path: templatesPath + "/" + created.ID, Token: tok}); resp.Status != 404 {
			t.Errorf("DELETE twice: %d", resp.Status)
		}
	})
}

func TestTemplates_ListFiltersAndFields(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.notification_template.ALL")
		for i, module := range []string{"Reports", "Orchestration", "Reports"} {
			body := newTemplateBody(fmt.Sprintf("Template %d", i))
			body["module"] = module
			body["mail"].(map[string]any)["subject"] = "Hello %display_name%"
			body["sms"].(map[string]any)["content"] = "Hi"
			createTemplate(t, env, tok, body)
		}
		other := env.NewOrg("Other")
		createTemplate(t, env, env.Token(other, "svc.notification_template.all"), newTemplateBody("Template 9"))

		resp := env.Get(templatesPath+"?filter="+q(`module eq "Reports" and name co "template"`)+"&fields=name,module&limit=1", tok)
		var page struct {
			Data []map[string]any
			Meta struct {
				StartIndex int `json:"start_index"`
				Limit      int `json:"limit"`
				Total      int `json:"total_no_of_objects"`
			}
		}
		resp.JSON(t, &page)
		if resp.Status != 200 || page.Meta.Total != 2 || len(page.Data) != 1 || page.Meta.Limit != 1 {
			t.Fatalf("list: %d %s", resp.Status, resp.Body)
		}
		if item := page.Data[0]; len(item) != 3 || item["name"] != "Template 0" || item["mail"] != nil {
			t.Errorf("fields=name,module gave %v", item)
		}
		if resp := env.Get(templatesPath+"?filter="+q(`owner eq "x"`), tok); resp.Status != 400 || resp.ErrorBody(t).Code != "00000107" || !strings.Contains(resp.ErrorBody(t).Detail, "filter") {
			t.Errorf("bad filter: %d %s", resp.Status, resp.Body)
		}
	})
}

func TestTemplates_BadInputNamesTheField(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		tok := env.Token(env.Org, "svc.notification_template.create")
		lim := notification.TemplateLimits
		for _, tc := range []struct {
			name   string
			change func(map[string]any)
			field  string
		}{
			{"missing name", func(b map[string]any) { delete(b, "name") }, "name"},
			{"name over the limit", func(b map[string]any) { b["name"] = strings.Repeat("n", lim.MaxTemplateNameSize+1) }, "name"},
			{"name against the regex", func(b map[string]any) { b["name"] = "<script>" }, "name"},
			{"unknown module", func(b map[string]any) { b["module"] = "Billing" }, "module"},
			{"content over the limit", func(b map[string]any) {
				b["mail"].(map[string]any)["content"] = strings.Repeat("c", lim.MaxMailContentSize+1)
			}, "mail.content"},
			{"bad cc", func(b map[string]any) { b["mail"].(map[string]any)["cc"] = []string{"a@example.com", "nope"} }, "mail.cc[1]"},
			{"unknown macro", func(b map[string]any) { b["sms"].(map[string]any)["content"] = "%password%" }, "sms.content"},
			{"bad data URI", func(b map[string]any) {
				b["mail"].(map[string]any)["attachments"] = []map[string]any{{"name": "a.pdf", "file": "data:application/pdf;base64,@@"}}
			}, "mail.attachments[0].file"},
			{"wrong type", func(b map[string]any) { b["is_default"] = "yes" }, "is_default"},
			{"unknown field", func(b map[string]any) { b["owner"] = "me" }, "owner"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := newTemplateBody("Valid name")
				tc.change(body)
				resp := env.Do(apitest.Request{Method: "POST", Path: templatesPath, Token: tok, Body: body})
				if resp.Status != 400 {
					t.Fatalf("%d %s", resp.Status, resp.Body)
				}
				if detail := resp.ErrorBody(t).Detail; !strings.HasPrefix(detail, tc.field+": ") {
					t.Errorf("detail %q does not name %s", detail, tc.field)
				}
			})
		}
		// Nothing was written.
		list := env.Get(templatesPath, env.Token(env.Org, "svc.notification_template.read"))
		if !strings.Contains(string(list.Body), `"total_no_of_objects":0`) {
			t.Errorf("a refused create left rows: %s", list.Body)
		}
		createTemplate(t, env, tok, newTemplateBody("Taken"))
		resp := env.Do(apitest.Request{Method: "POST", Path: templatesPath, Token: tok, Body: newTemplateBody("taken")})
		if resp.Status != 409 || !strings.HasPrefix(resp.ErrorBody(t).Detail, "name: ") {
			t.Errorf("duplicate name: %d %s", resp.Status, resp.Body)
		}
	})
}

func TestTemplates_Scopes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		reader := env.Token(env.Org, "svc.notification_template.read")
		if resp := env.Do(apitest.Request{Method: "POST", Path: templatesPath, Token: reader, Body: newTemplateBody("x")}); resp.Status != 403 {
			t.Errorf("read scope may not create: %d", resp.Status)
		}
		if resp := env.Get(templatesPath, env.Token(env.Org, "svc.meta.READ")); resp.Status != 403 {
			t.Errorf("meta scope may not list templates: %d", resp.Status)
		}
		if resp := env.Get("/api/v1/meta/templates/notification/default_configs", reader); resp.Status != 403 {
			t.Errorf("template scope may not read meta: %d", resp.Status)
		}
	})
}

func TestMeta_ConfigsAgreeWithTheChecks(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		meta := env.Token(env.Org, "svc.meta.READ")
		var defaults struct {
			Data struct {
				Modes []struct {
					ServerValue string `json:"server_value"`
				}
				MaxMailContentSize  int    `json:"max_mail_content_size"`
				MaxSMSContentSize   int    `json:"max_sms_content_size"`
				MaxTemplateNameSize int    `json:"max_template_name_size"`
				MaxTemplateDescSize int    `json:"max_template_desc_size"`
				MaxToCcSize         int    `json:"max_to_cc_size"`
				MaxSMSNumberCount   int    `json:"max_sms_number_count"`
				TemplateNameRegex   string `json:"template_name_regex"`
				MailRcptMacrosList  map[string][]struct {
					ServerValue string `json:"server_value"`
				} `json:"mail_rcpt_macros_list"`
			}
		}
		resp := env.Get("/api/v1/meta/templates/notification/default_configs", meta)
		resp.JSON(t, &defaults)
		d := defaults.Data
		if resp.Status != 200 || len(d.Modes) != 3 || d.MailRcptMacrosList["reports"][0].ServerValue != "SELF" {
			t.Fatalf("default_configs: %d %s", resp.Status, resp.Body)
		}
		tok := env.Token(env.Org, "svc.notification_template.all")
		// Each served limit is the exact edge of what POST accepts.
		for _, tc := range []struct {
			field string
			max   int
			set   func(b map[string]any, n int)
		}{
			{"name", d.MaxTemplateNameSize, func(b map[string]any, n int) { b["name"] = strings.Repeat("n", n) }},
			{"description", d.MaxTemplateDescSize, func(b map[string]any, n int) { b["description"] = strings.Repeat("d", n) }},
			{"mail.content", d.MaxMailContentSize, func(b map[string]any, n int) { b["mail"].(map[string]any)["content"] = strings.Repeat("c", n) }},
			{"sms.content", d.MaxSMSContentSize, func(b map[string]any, n int) { b["sms"].(map[string]any)["content"] = strings.Repeat("s", n) }},
			{"mail.to", d.MaxToCcSize, func(b map[string]any, n int) {
				to := make([]string, n)
				for i := range to {
					to[i] = fmt.Sprintf("u%d@example.com", i)
				}
				b["mail"].(map[string]any)["to"] = to
			}},
			{"sms.to", d.MaxSMSNumberCount, func(b map[string]any, n int) {
				to := make([]string, n)
				for i := range to {
					to[i] = fmt.Sprintf("+1415555%04d", i)
				}
				b["sms"].(map[string]any)["to"] = to
			}},
		} {
			for _, n := range []int{tc.max, tc.max + 1} {
				body := newTemplateBody(fmt.Sprintf("Edge %s %d", strings.ReplaceAll(tc.field, ".", " "), n))
				tc.set(body, n)
				resp = env.Do(apitest.Request{Method: "POST", Path: templatesPath, Token: tok, Body: body})
				want := http.StatusCreated
				if n > tc.max {
					want = 400
				}
				if resp.Status != want {
					t.Errorf("%s with %d: %d, want %d: %.200s", tc.field, n, resp.Status, want, resp.Body)
				}
			}
		}
		if d.TemplateNameRegex != notification.TemplateLimits.TemplateNameRegex {
			t.Errorf("served regex %q", d.TemplateNameRegex)
		}

		var module struct {
			Data struct {
				HTMLWrap      string `json:"html_wrap"`
				ContentMacros []struct {
					ServerValue string `json:"server_value"`
				} `json:"content_macros"`
			}
		}
		resp = env.Get("/api/v1/meta/templates/notification/module_configs", meta)
		resp.JSON(t, &module)
		if resp.Status != 200 || !strings.Contains(module.Data.HTMLWrap, "{{body}}") || !hasMacro(module.Data.ContentMacros, "%report_name%") {
			t.Errorf("module_configs defaults to Reports: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get("/api/v1/meta/templates/notification/module_configs?module=orchestration", meta)
		resp.JSON(t, &module)
		if resp.Status != 200 || !hasMacro(module.Data.ContentMacros, "%workflow_name%") || hasMacro(module.Data.ContentMacros, "%report_name%") {
			t.Errorf("module=orchestration: %d %s", resp.Status, resp.Body)
		}
		resp = env.Get("/api/v1/meta/templates/notification/module_configs?module=Billing", meta)
		if resp.Status != 400 || resp.ErrorBody(t).Code != "00000107" || !strings.Contains(resp.ErrorBody(t).Detail, `"module"`) {
			t.Errorf("unknown module: %d %s", resp.Status, resp.Body)
		}
	})
}

func hasMacro(list []struct {
	ServerValue string `json:"server_value"`
}, name string) bool {
	for _, m := range list {
		if m.ServerValue == name {
			return true
		}
	}
	return false
}
