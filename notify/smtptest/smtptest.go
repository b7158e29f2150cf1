// Package smtptest runs a real SMTP server (github.com/emersion/go-smtp) on
// 127.0.0.1 for tests and benchmarks: plain, STARTTLS or implicit TLS, with
// optional PLAIN authentication, keeping or counting what it receives.
package smtptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// TLS modes of the server.
const (
	TLSNone     = "none"
	TLSStartTLS = "starttls"
	TLSImplicit = "implicit"
)

// Options choose how the server behaves.
type Options struct {
	// TLS is none (default), starttls or implicit.
	TLS string
	// Username and Password, when set, require AUTH PLAIN.
	Username, Password string
	// Discard counts messages without keeping them (benchmarks).
	Discard bool
	// OnData, when set, runs for each message before it is accepted; an
	// error refuses it (an *smtp.SMTPError gives its code). It may also
	// sleep or close the connection.
	OnData func(m Message, c *smtp.Conn) error
}

// Message is one received message.
type Message struct {
	From string
	To   []string
	Data []byte
}

// Server is a running SMTP server.
type Server struct {
	Host string
	Port int
	// CAs trusts the server's certificate.
	CAs *x509.CertPool

	opts     Options
	srv      *smtp.Server
	ln       net.Listener
	mu       sync.Mutex
	msgs     []Message
	count    int
	sessions int
	changed  chan struct{}
}

// Start runs a server on 127.0.0.1 at a free port.
func Start(opts Options) (*Server, error) {
	s := &Server{opts: opts, changed: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(s.newSession))
	s.srv.Domain = "localhost"
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	s.srv.MaxMessageBytes = 64 << 20
	s.srv.AllowInsecureAuth = opts.TLS == "" || opts.TLS == TLSNone
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if opts.TLS == TLSStartTLS || opts.TLS == TLSImplicit {
		cfg, pool, err := selfSigned()
		if err != nil {
			return nil, errors.Join(err, ln.Close())
		}
		s.CAs = pool
		if opts.TLS == TLSStartTLS {
			s.srv.TLSConfig = cfg
		} else {
			ln = tls.NewListener(ln, cfg)
		}
	}
	s.ln = ln
	addr := ln.Addr().(*net.TCPAddr)
	s.Host, s.Port = "127.0.0.1", addr.Port
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Close stops the server and drops its connections.
func (s *Server) Close() error { return s.srv.Close() }

// Messages returns what was received so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Count is the number of messages accepted so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Sessions is the number of connections opened so far.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// WaitCount waits until at least n messages were accepted, or timeout.
func (s *Server) WaitCount(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		count, changed := s.count, s.changed
		s.mu.Unlock()
		if count >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

func (s *Server) accept(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	if !s.opts.Discard {
		s.msgs = append(s.msgs, m)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	s.sessions++
	s.mu.Unlock()
	return &session{srv: s, conn: c, authed: s.opts.Username == ""}, nil
}

type session struct {
	srv    *Server
	conn   *smtp.Conn
	authed bool
	msg    Message
}

// AuthMechanisms implements smtp.AuthSession: PLAIN when credentials are set.
func (ss *session) AuthMechanisms() []string {
	if ss.srv.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth checks the credentials of Options.
func (ss *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if username != ss.srv.opts.Username || password != ss.srv.opts.Password {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		return nil
	}), nil
}

// Mail starts a message; it needs authentication when credentials are set.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.msg = Message{From: from}
	return nil
}

// Rcpt adds a recipient.
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.msg.To = append(ss.msg.To, to)
	return nil
}

// Data reads the message, runs Options.OnData and accepts it.
func (ss *session) Data(r io.Reader) error {
	var buf bytes.Buffer
	if ss.srv.opts.Discard {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
	} else if _, err := io.Copy(&buf, r); err != nil {
		return err
	}
	m := ss.msg
	m.Data = buf.Bytes()
	if hook := ss.srv.opts.OnData; hook != nil {
		if err := hook(m, ss.conn); err != nil {
			return err
		}
	}
	ss.srv.accept(m)
	return nil
}

// Reset drops the message in progress.
func (ss *session) Reset() { ss.msg = Message{} }

// Logout ends the session.
func (ss *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost.
func selfSigned() (*tls.Config, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "smtptest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}, MinVersion: tls.VersionTLS12}, pool, nil
}
