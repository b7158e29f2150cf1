package main

import (
	"fmt"
	"strings"
	"testing"

	"iam/notify"
)

func TestNotifyConfig_FromEnvironment(t *testing.T) {
	cfg, err := loadConfig([]string{
		"IAM_SMTP_HOST=smtp.example.com", "IAM_SMTP_TLS=implicit", "IAM_SMTP_USERNAME=mailer",
		"IAM_SMTP_PASSWORD=hunter2", "IAM_SMTP_FROM=IAM <iam@example.com>",
		"IAM_SMS_PROVIDER=twilio", "IAM_SMS_TWILIO_ACCOUNT_SID=AC1", "IAM_SMS_TWILIO_AUTH_TOKEN=tw-secret", "IAM_SMS_TWILIO_FROM=+15005550006",
		"IAM_NOTIFY_MESSAGES_PER_SECOND=20",
	})
	if err != nil {
		t.Fatal(err)
	}
	n := cfg.Notify
	if n.SMTPPassword.Reveal() != "hunter2" || n.TwilioAuthToken.Reveal() != "tw-secret" || n.MessagesPerSecond != 20 || n.ActivitiesPerSecond != 10 {
		t.Errorf("notify config %+v", n)
	}
	if s := fmt.Sprintf("%+v", cfg); strings.Contains(s, "hunter2") || strings.Contains(s, "tw-secret") {
		t.Errorf("a printed configuration shows a secret: %s", s)
	}
	if got := n.smtpConfig(nil); got.TLS != notify.TLSImplicit || got.Port != 0 {
		t.Errorf("smtp config %+v", got)
	}
}

func TestNotifyConfig_RefusesWhatCannotWork(t *testing.T) {
	for _, env := range [][]string{
		{"IAM_SMTP_HOST=smtp.example.com"}, // no sender
		{"IAM_SMTP_HOST=smtp.example.com", "IAM_SMTP_FROM=a@example.com", "IAM_SMTP_TLS=ssl"},
		{"IAM_SMTP_HOST=smtp.example.com", "IAM_SMTP_FROM=a@example.com", "IAM_SMTP_PASSWORD=hunter2"}, // no username
		{"IAM_SMS_PROVIDER=carrier-pigeon"},
		{"IAM_SMS_PROVIDER=webhook"},
		{"IAM_SMS_PROVIDER=twilio", "IAM_SMS_TWILIO_ACCOUNT_SID=AC1"},
		{"IAM_NOTIFY_ACTIVITIES_PER_SECOND=-1"},
	} {
		_, err := loadConfig(env)
		if err == nil {
			t.Errorf("%v accepted", env)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
