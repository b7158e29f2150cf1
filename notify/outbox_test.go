package notify_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"iam/notify"
)

func TestOutbox(t *testing.T) {
	dir := t.TempDir()
	o := &notify.Outbox{Dir: dir, From: "iam@localhost"}
	if err := o.Send(context.Background(), &notify.Message{To: []string{"ann@example.com"}, Subject: "Hello", HTML: "<p>Hi</p>"}); err != nil {
		t.Fatal(err)
	}
	if err := o.SendSMS(context.Background(), notify.SMS{To: "+1555", Body: "Hi"}); err != nil {
		t.Fatal(err)
	}
	mails, _ := filepath.Glob(filepath.Join(dir, "mail", "*.eml"))
	sms, _ := filepath.Glob(filepath.Join(dir, "sms", "*.json"))
	if len(mails) != 1 || len(sms) != 1 {
		t.Fatalf("outbox holds %v and %v", mails, sms)
	}
	eml, err := os.ReadFile(mails[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(eml), "Subject: Hello") || !strings.Contains(string(eml), "To: <ann@example.com>") {
		t.Errorf("mail file:\n%s", eml)
	}
	log, err := os.ReadFile(filepath.Join(dir, "outbox.log")) //nolint:gosec // G304: a file in the test's own temporary directory
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(log)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "\tmail\tto=ann@example.com") || !strings.Contains(lines[1], "\tsms\tto=+1555") {
		t.Errorf("outbox.log:\n%s", log)
	}
}
