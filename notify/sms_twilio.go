package notify

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// TwilioConfig configures TwilioGateway.
type TwilioConfig struct {
	// BaseURL is the API's root; https://api.twilio.com when empty. Any
	// service with the same shape will do.
	BaseURL    string
	AccountSID string
	AuthToken  Secret
	// From is the sending number, or MessagingServiceSID the messaging
	// service; one of the two is required.
	From                string
	MessagingServiceSID string
	// Timeout bounds one request; 10 s when zero.
	Timeout time.Duration
	Retry   HTTPRetry
	// Client replaces the default HTTP client (tests).
	Client *http.Client
}

// TwilioGateway sends SMS through the Twilio Messages API: a form POST to
// {BaseURL}/2010-04-01/Accounts/{AccountSID}/Messages.json with To, Body and
// From (or MessagingServiceSid), authenticated with the account SID and
// auth token. A 2xx answer is acceptance; see HTTPRetry for what is retried.
type TwilioGateway struct {
	cfg      TwilioConfig
	endpoint string
	hc       *http.Client
}

// NewTwilioGateway checks cfg and returns the gateway.
func NewTwilioGateway(cfg TwilioConfig) (*TwilioGateway, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.twilio.com"
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, errors.New("sms twilio: the base URL must be an http or https URL")
	case cfg.AccountSID == "" || cfg.AuthToken == "":
		return nil, errors.New("sms twilio: the account SID and auth token are required")
	case cfg.From == "" && cfg.MessagingServiceSID == "":
		return nil, errors.New("sms twilio: a from number or a messaging service SID is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{Timeout: cfg.Timeout}
	}
	endpoint := strings.TrimRight(cfg.BaseURL, "/") + "/2010-04-01/Accounts/" + url.PathEscape(cfg.AccountSID) + "/Messages.json"
	return &TwilioGateway{cfg: cfg, endpoint: endpoint, hc: hc}, nil
}

// SendSMS implements SMSGateway.
func (g *TwilioGateway) SendSMS(ctx context.Context, m SMS) error {
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	if g.cfg.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", g.cfg.MessagingServiceSID)
	} else {
		form.Set("From", g.cfg.From)
	}
	encoded := form.Encode()
	_, err := postWithRetry(ctx, g.hc, g.cfg.Retry, func(ctx context.Context) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, strings.NewReader(encoded))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.SetBasicAuth(g.cfg.AccountSID, g.cfg.AuthToken.Reveal())
		return req, nil
	})
	return err
}
