package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Outbox is a Mailer and an SMSGateway that deliver nowhere: each mail is
// written to <Dir>/mail/<time>-<n>.eml, each SMS to <Dir>/sms/<time>-<n>.json,
// and one line per message is appended to <Dir>/outbox.log. `iam dev` sends
// here unless SMTP or an SMS gateway is configured.
type Outbox struct {
	Dir string
	// From is the sender written into mails.
	From string
	Log  *slog.Logger

	mu  sync.Mutex // serialises outbox.log
	seq atomic.Int64
}

// Send implements Mailer.
func (o *Outbox) Send(_ context.Context, m *Message) error {
	msg, err := buildMsg(o.From, m)
	if err != nil {
		return permanent(0, err)
	}
	path, err := o.path("mail", ".eml")
	if err != nil {
		return temporary(0, err)
	}
	if err := msg.WriteToFile(path); err != nil {
		return temporary(0, fmt.Errorf("write outbox mail: %w", err))
	}
	return o.logLine("mail", strings.Join(m.To, ","), m.Subject, path)
}

// SendSMS implements SMSGateway.
func (o *Outbox) SendSMS(_ context.Context, m SMS) error {
	path, err := o.path("sms", ".json")
	if err != nil {
		return temporary(0, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return permanent(0, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return temporary(0, fmt.Errorf("write outbox sms: %w", err))
	}
	return o.logLine("sms", m.To, m.Body, path)
}

func (o *Outbox) path(kind, ext string) (string, error) {
	dir := filepath.Join(o.Dir, kind)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create outbox folder: %w", err)
	}
	name := fmt.Sprintf("%s-%06d%s", time.Now().UTC().Format("20060102T150405.000000000Z"), o.seq.Add(1), ext)
	return filepath.Join(dir, name), nil
}

// logLine appends "time kind to summary path" to outbox.log and logs where
// the message went (not what it says).
func (o *Outbox) logLine(kind, to, summary, path string) error {
	line := fmt.Sprintf("%s\t%s\tto=%s\t%q\t%s\n", time.Now().UTC().Format(time.RFC3339), kind, to, summary, path)
	o.mu.Lock()
	defer o.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(o.Dir, "outbox.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return temporary(0, fmt.Errorf("open outbox log: %w", err))
	}
	_, err = f.WriteString(line)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return temporary(0, fmt.Errorf("write outbox log: %w", err))
	}
	if o.Log != nil {
		o.Log.Info("notification written to the outbox", "kind", kind, "file", path)
	}
	return nil
}
