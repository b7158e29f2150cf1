package main

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"iam/models/store"
	"iam/notify"
	"iam/worker"
	"iam/workflows"
)

// NotifyConfig configures notification delivery (read by dev and worker).
// Secrets come from the environment only and are never logged
// (notify.Secret prints as a mask).
type NotifyConfig struct {
	// SMTP: mail goes through this server when SMTPHost is set.
	SMTPHost string `env:"IAM_SMTP_HOST"`
	// SMTPPort defaults by TLS mode: 25 (none), 587 (starttls), 465 (implicit).
	SMTPPort     int           `env:"IAM_SMTP_PORT"`
	SMTPTLS      string        `env:"IAM_SMTP_TLS" envDefault:"starttls"`
	SMTPCAFile   string        `env:"IAM_SMTP_TLS_CA_FILE"`
	SMTPUsername string        `env:"IAM_SMTP_USERNAME"`
	SMTPPassword notify.Secret `env:"IAM_SMTP_PASSWORD"`
	SMTPAuth     string        `env:"IAM_SMTP_AUTH" envDefault:"auto"`
	SMTPFrom     string        `env:"IAM_SMTP_FROM"`
	SMTPHELO     string        `env:"IAM_SMTP_HELO"`
	SMTPMaxConns int           `env:"IAM_SMTP_MAX_CONNS" envDefault:"4"`
	SMTPTimeout  time.Duration `env:"IAM_SMTP_TIMEOUT" envDefault:"15s"`

	// SMS: webhook or twilio; empty sends none (or to the outbox).
	SMSProvider               string        `env:"IAM_SMS_PROVIDER"`
	SMSWebhookURL             string        `env:"IAM_SMS_WEBHOOK_URL"`
	SMSWebhookToken           notify.Secret `env:"IAM_SMS_WEBHOOK_TOKEN"`
	TwilioBaseURL             string        `env:"IAM_SMS_TWILIO_BASE_URL" envDefault:"https://api.twilio.com"`
	TwilioAccountSID          string        `env:"IAM_SMS_TWILIO_ACCOUNT_SID"`
	TwilioAuthToken           notify.Secret `env:"IAM_SMS_TWILIO_AUTH_TOKEN"`
	TwilioFrom                string        `env:"IAM_SMS_TWILIO_FROM"`
	TwilioMessagingServiceSID string        `env:"IAM_SMS_TWILIO_MESSAGING_SERVICE_SID"`
	SMSTimeout                time.Duration `env:"IAM_SMS_TIMEOUT" envDefault:"10s"`
	SMSAttempts               int           `env:"IAM_SMS_ATTEMPTS" envDefault:"3"`

	// OutboxDir receives mail and SMS of the channels not configured; dev
	// uses <data dir>/outbox when it is empty.
	OutboxDir string `env:"IAM_NOTIFY_OUTBOX_DIR"`
	// ActivitiesPerSecond caps the send steps (up to 500 messages each) the
	// notify task queue hands out per second, across all workers.
	ActivitiesPerSecond float64 `env:"IAM_NOTIFY_ACTIVITIES_PER_SECOND" envDefault:"10"`
	// MessagesPerSecond paces the messages of one worker process; 0: unpaced.
	MessagesPerSecond float64 `env:"IAM_NOTIFY_MESSAGES_PER_SECOND" envDefault:"0"`
	// Concurrency is the messages one send step has in flight.
	Concurrency int `env:"IAM_NOTIFY_CONCURRENCY" envDefault:"4"`
	// ClaimBatch is the deliveries a sender claims per ledger write: a crash
	// leaves at most Concurrency × ClaimBatch of them uncertain.
	ClaimBatch int `env:"IAM_NOTIFY_CLAIM_BATCH" envDefault:"4"`
}

// problems lists what is wrong with the notification settings.
func (n NotifyConfig) problems() []string {
	var out []string
	if n.SMTPHost != "" {
		if _, err := notify.NewSMTPMailer(n.smtpConfig(nil)); err != nil {
			out = append(out, "IAM_SMTP_*: "+strings.TrimPrefix(err.Error(), "smtp: "))
		}
		if n.SMTPCAFile != "" {
			if _, err := n.rootCAs(); err != nil {
				out = append(out, err.Error())
			}
		}
	}
	switch n.SMSProvider {
	case "":
	case "webhook":
		if _, err := notify.NewWebhookGateway(n.webhookConfig()); err != nil {
			out = append(out, "IAM_SMS_WEBHOOK_URL: "+err.Error())
		}
	case "twilio":
		if _, err := notify.NewTwilioGateway(n.twilioConfig()); err != nil {
			out = append(out, "IAM_SMS_TWILIO_*: "+err.Error())
		}
	default:
		out = append(out, fmt.Sprintf("IAM_SMS_PROVIDER %q is not webhook or twilio (or empty)", n.SMSProvider))
	}
	if n.ActivitiesPerSecond < 0 || n.MessagesPerSecond < 0 {
		out = append(out, "IAM_NOTIFY_ACTIVITIES_PER_SECOND and IAM_NOTIFY_MESSAGES_PER_SECOND must not be negative")
	}
	if n.Concurrency < 1 || n.ClaimBatch < 1 || n.SMTPMaxConns < 1 || n.SMSAttempts < 1 {
		out = append(out, "IAM_NOTIFY_CONCURRENCY, IAM_NOTIFY_CLAIM_BATCH, IAM_SMTP_MAX_CONNS and IAM_SMS_ATTEMPTS must be positive")
	}
	return out
}

func (n NotifyConfig) smtpConfig(roots *x509.CertPool) notify.SMTPConfig {
	return notify.SMTPConfig{
		Host: n.SMTPHost, Port: n.SMTPPort, TLS: notify.TLSMode(strings.ToLower(n.SMTPTLS)), RootCAs: roots,
		Username: n.SMTPUsername, Password: n.SMTPPassword, Auth: n.SMTPAuth, From: n.SMTPFrom, HELO: n.SMTPHELO,
		MaxConns: n.SMTPMaxConns, Timeout: n.SMTPTimeout,
	}
}

// smtpMailer makes the mailer of IAM_SMTP_HOST.
func (n NotifyConfig) smtpMailer() (*notify.SMTPMailer, error) {
	roots, err := n.rootCAs()
	if err != nil {
		return nil, err
	}
	return notify.NewSMTPMailer(n.smtpConfig(roots))
}

func (n NotifyConfig) rootCAs() (*x509.CertPool, error) {
	if n.SMTPCAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(n.SMTPCAFile)
	if err != nil {
		return nil, fmt.Errorf("IAM_SMTP_TLS_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("IAM_SMTP_TLS_CA_FILE holds no PEM certificate")
	}
	return pool, nil
}

func (n NotifyConfig) retry() notify.HTTPRetry { return notify.HTTPRetry{Attempts: n.SMSAttempts} }

func (n NotifyConfig) webhookConfig() notify.WebhookConfig {
	return notify.WebhookConfig{URL: n.SMSWebhookURL, Token: n.SMSWebhookToken, Timeout: n.SMSTimeout, Retry: n.retry()}
}

func (n NotifyConfig) twilioConfig() notify.TwilioConfig {
	return notify.TwilioConfig{BaseURL: n.TwilioBaseURL, AccountSID: n.TwilioAccountSID, AuthToken: n.TwilioAuthToken,
		From: n.TwilioFrom, MessagingServiceSID: n.TwilioMessagingServiceSID, Timeout: n.SMSTimeout, Retry: n.retry()}
}

// notifyDeps builds the notify worker's senders: SMTP and the SMS gateway
// when configured, otherwise the outbox folder (outboxDefault when
// IAM_NOTIFY_OUTBOX_DIR is empty), otherwise none, which fails those
// deliveries. close releases the SMTP connections.
func (n NotifyConfig) notifyDeps(outboxDefault string, log *slog.Logger) (deps worker.NotifyDeps, close func(), err error) {
	deps = worker.NotifyDeps{ActivitiesPerSecond: n.ActivitiesPerSecond, MessagesPerSecond: n.MessagesPerSecond,
		Concurrency: n.Concurrency, ClaimBatch: n.ClaimBatch, Log: log}
	close = func() {}
	outboxDir := n.OutboxDir
	if outboxDir == "" {
		outboxDir = outboxDefault
	}
	var outbox *notify.Outbox
	if outboxDir != "" {
		from := n.SMTPFrom
		if from == "" {
			from = "iam@localhost"
		}
		outbox = &notify.Outbox{Dir: filepath.Clean(outboxDir), From: from, Log: log}
	}
	switch {
	case n.SMTPHost != "":
		var m *notify.SMTPMailer
		if m, err = n.smtpMailer(); err != nil {
			return deps, close, err
		}
		deps.Mail, close = m, func() {
			// The mail sent is sent: a connection that fails to close loses nothing.
			if closeErr := m.Close(); closeErr != nil {
				log.Warn("close the SMTP connections", "error", closeErr)
			}
		}
		log.Info("mail goes through SMTP", "host", n.SMTPHost, "tls", n.SMTPTLS, "user", n.SMTPUsername)
	case outbox != nil:
		deps.Mail = outbox
		log.Info("mail goes to the outbox (IAM_SMTP_HOST is not set)", "dir", outbox.Dir)
	default:
		log.Warn("no mail server: mail deliveries fail (set IAM_SMTP_HOST)")
	}
	switch {
	case n.SMSProvider == "webhook":
		deps.SMS, err = notify.NewWebhookGateway(n.webhookConfig())
	case n.SMSProvider == "twilio":
		deps.SMS, err = notify.NewTwilioGateway(n.twilioConfig())
	case outbox != nil:
		deps.SMS = outbox
		log.Info("SMS go to the outbox (IAM_SMS_PROVIDER is not set)", "dir", outbox.Dir)
	default:
		log.Warn("no SMS gateway: SMS deliveries fail (set IAM_SMS_PROVIDER)")
	}
	return deps, close, err
}

// startNotifyWorker runs the notify worker (the rate-limited send step of
// notification runs) beside the main worker; stop stops it.
func startNotifyWorker(tc client.Client, store *store.Store, n NotifyConfig, outboxDefault string, log *slog.Logger) (stop func(), err error) {
	deps, closeMail, err := n.notifyDeps(outboxDefault, log.With("component", "notify"))
	if err != nil {
		return nil, err
	}
	w := worker.NewNotify(tc, workflows.TaskQueue, store, deps)
	if err := w.Start(); err != nil {
		closeMail()
		return nil, fmt.Errorf("start notify worker: %w", err)
	}
	return func() { w.Stop(); closeMail() }, nil
}

// summary says where notifications go, for the dev banner.
func (n NotifyConfig) summary(outboxDefault string) string {
	outbox := n.OutboxDir
	if outbox == "" {
		outbox = outboxDefault
	}
	mail, sms := "outbox "+outbox, "outbox "+outbox
	if n.SMTPHost != "" {
		mail = "SMTP " + n.SMTPHost
	}
	if n.SMSProvider != "" {
		sms = n.SMSProvider
	}
	return "mail to " + mail + ", SMS to " + sms
}
