package notify

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// TLSMode is how an SMTP connection is protected.
type TLSMode string

// The TLS modes.
const (
	// TLSNone speaks plain SMTP (a relay on localhost or a private network).
	TLSNone TLSMode = "none"
	// TLSStartTLS upgrades the connection with STARTTLS and refuses a server
	// that does not offer it (submission, port 587).
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit opens TLS before SMTP starts (submissions, port 465).
	TLSImplicit TLSMode = "implicit"
)

// SMTPConfig is where and how mail is sent.
type SMTPConfig struct {
	Host string
	// Port defaults by TLS mode: 25 (none), 587 (starttls), 465 (implicit).
	Port int
	TLS  TLSMode
	// RootCAs verifies the server's certificate; nil means the system roots.
	RootCAs *x509.CertPool
	// Username and Password authenticate when Username is set. Auth names
	// the mechanism: "" or auto (the strongest the server offers), plain,
	// login, cram-md5, scram-sha-1, scram-sha-256.
	Username string
	Password Secret
	Auth     string
	// From is the sender: an address, or "Name <address>".
	From string
	// HELO is the name given in EHLO; the host name when empty.
	HELO string
	// MaxConns bounds the connections open at once (and so the sends in
	// flight); 4 when zero.
	MaxConns int
	// Timeout bounds dialing and each SMTP command; 15 s when zero.
	Timeout time.Duration
	// IdleTimeout closes a pooled connection unused this long; 30 s when zero.
	IdleTimeout time.Duration
}

var authTypes = map[string]gomail.SMTPAuthType{
	"":              gomail.SMTPAuthAutoDiscover,
	"auto":          gomail.SMTPAuthAutoDiscover,
	"plain":         gomail.SMTPAuthPlain,
	"login":         gomail.SMTPAuthLogin,
	"cram-md5":      gomail.SMTPAuthCramMD5,
	"scram-sha-1":   gomail.SMTPAuthSCRAMSHA1,
	"scram-sha-256": gomail.SMTPAuthSCRAMSHA256,
}

// withDefaults returns c with its zero values filled and checks it.
func (c SMTPConfig) withDefaults() (SMTPConfig, error) {
	var problems []string
	if strings.TrimSpace(c.Host) == "" {
		problems = append(problems, "host is required")
	}
	switch c.TLS {
	case "":
		c.TLS = TLSStartTLS
	case TLSNone, TLSStartTLS, TLSImplicit:
	default:
		problems = append(problems, fmt.Sprintf("TLS mode %q is not none, starttls or implicit", c.TLS))
	}
	if c.Port == 0 {
		c.Port = map[TLSMode]int{TLSNone: 25, TLSStartTLS: 587, TLSImplicit: 465}[c.TLS]
	}
	if c.Port < 1 || c.Port > 65535 {
		problems = append(problems, fmt.Sprintf("port %d is not a port number", c.Port))
	}
	if _, ok := authTypes[strings.ToLower(c.Auth)]; !ok {
		problems = append(problems, fmt.Sprintf("auth %q is not auto, plain, login, cram-md5, scram-sha-1 or scram-sha-256", c.Auth))
	}
	if c.Username == "" && c.Password != "" {
		problems = append(problems, "a password needs a username")
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		problems = append(problems, fmt.Sprintf("from %q is not a mail address", c.From))
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4
	}
	if c.MaxConns < 1 {
		problems = append(problems, "max connections must be positive")
	}
	if c.Timeout == 0 {
		c.Timeout = 15 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if len(problems) > 0 {
		return c, errors.New("smtp: " + strings.Join(problems, "; "))
	}
	return c, nil
}

// clientOptions are the go-mail options for c. Pooled connections skip the
// NOOP before each message and the RSET after each delivered one: a broken
// connection is noticed by the next MAIL FROM, which is safe to retry.
func (c SMTPConfig) clientOptions() []gomail.Option {
	tlsCfg := &tls.Config{ServerName: c.Host, RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12}
	opts := []gomail.Option{
		gomail.WithPort(c.Port),
		gomail.WithTimeout(c.Timeout),
		gomail.WithTLSConfig(tlsCfg),
		gomail.WithoutNoop(),
		gomail.WithoutRset(),
	}
	switch c.TLS {
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if c.HELO != "" {
		opts = append(opts, gomail.WithHELO(c.HELO))
	}
	if c.Username != "" {
		opts = append(opts,
			gomail.WithSMTPAuth(authTypes[strings.ToLower(c.Auth)]),
			gomail.WithUsername(c.Username),
			gomail.WithPassword(c.Password.Reveal()),
		)
	}
	return opts
}
