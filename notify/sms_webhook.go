package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// WebhookConfig configures WebhookGateway.
type WebhookConfig struct {
	// URL receives a POST per message (http or https).
	URL string
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token Secret
	// Timeout bounds one request; 10 s when zero.
	Timeout time.Duration
	Retry   HTTPRetry
	// Client replaces the default HTTP client (tests).
	Client *http.Client
}

// WebhookGateway is the generic SMS adapter: it posts
//
//	{"to": "+14155550100", "message": "text", "reference": "delivery id"}
//
// as JSON to a URL, with the reference also in an Idempotency-Key header.
// Any 2xx answer is acceptance; see HTTPRetry for what is retried.
type WebhookGateway struct {
	cfg WebhookConfig
	hc  *http.Client
}

// NewWebhookGateway checks cfg and returns the gateway.
func NewWebhookGateway(cfg WebhookConfig) (*WebhookGateway, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("sms webhook: the URL must be an http or https URL")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	return &WebhookGateway{cfg: cfg, hc: hc}, nil
}

type webhookBody struct {
	To        string `json:"to"`
	Message   string `json:"message"`
	Reference string `json:"reference,omitempty"`
}

// SendSMS implements SMSGateway.
func (g *WebhookGateway) SendSMS(ctx context.Context, m SMS) error {
	body, err := json.Marshal(webhookBody{To: m.To, Message: m.Body, Reference: m.Reference})
	if err != nil {
		return permanent(0, err)
	}
	if _, err := postWithRetry(ctx, g.hc, g.cfg.Retry, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.cfg.URL, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if m.Reference != "" {
			req.Header.Set("Idempotency-Key", m.Reference)
		}
		if g.cfg.Token != "" {
			req.Header.Set("Authorization", "Bearer "+g.cfg.Token.Reveal())
		}
		return req, nil
	}); err != nil {
		return err
	}
	return nil
}
