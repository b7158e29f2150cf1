package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
)

// Mailer sends mail. Send returns nil once the server accepted the message,
// and otherwise an error Classify sorts. It is safe for concurrent use.
type Mailer interface {
	Send(ctx context.Context, m *Message) error
}

// SMTPMailer is the Mailer that speaks SMTP through go-mail. It keeps up to
// MaxConns connections open and sends over them concurrently, one message
// per SMTP transaction.
type SMTPMailer struct {
	cfg    SMTPConfig
	client *gomail.Client // holds the settings; connections are the pool's
	slots  chan struct{}  // one per connection that may be open
	mu     sync.Mutex
	idle   []*pooledConn
	closed bool
}

type pooledConn struct {
	c        *smtp.Client
	lastUsed time.Time
}

// NewSMTPMailer checks cfg and returns a mailer. It connects lazily, on the
// first Send.
func NewSMTPMailer(cfg SMTPConfig) (*SMTPMailer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	client, err := gomail.NewClient(cfg.Host, cfg.clientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	return &SMTPMailer{cfg: cfg, client: client, slots: make(chan struct{}, cfg.MaxConns)}, nil
}

// Send delivers m. A pooled connection that turns out broken before the
// message was handed over is replaced and the message sent once more; a
// failure after the end of DATA is never retried here (Uncertain).
func (s *SMTPMailer) Send(ctx context.Context, m *Message) error {
	msg, err := buildMsg(s.cfg.From, m)
	if err != nil {
		return permanent(0, err)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return temporary(0, ctx.Err())
	}
	defer func() { <-s.slots }()

	for attempt := 0; ; attempt++ {
		conn, fresh, err := s.conn(ctx)
		if err != nil {
			return temporary(0, fmt.Errorf("connect to %s:%d: %w", s.cfg.Host, s.cfg.Port, err))
		}
		sendErr := s.client.SendWithSMTPClient(conn.c, msg)
		if sendErr == nil {
			s.put(conn)
			return nil
		}
		out, reusable := classifySMTP(sendErr, msg)
		if out == nil { // delivered; only the clean-up after it failed
			s.drop(conn)
			return nil
		}
		if !reusable {
			s.drop(conn)
		} else {
			s.put(conn)
		}
		// A reused connection that broke before the message was handed over
		// had simply gone stale: try once on a new one.
		if !reusable && !fresh && attempt == 0 && Classify(out) == Temporary && smtpCode(out) == 0 {
			continue
		}
		return out
	}
}

// conn takes an idle connection or dials one; fresh says it was dialled.
func (s *SMTPMailer) conn(ctx context.Context) (*pooledConn, bool, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, errors.New("the mailer is closed")
	}
	var stale []*pooledConn
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if time.Since(c.lastUsed) < s.cfg.IdleTimeout && c.c.HasConnection() {
			s.mu.Unlock()
			s.quitAll(stale)
			return c, false, nil
		}
		stale = append(stale, c)
	}
	s.mu.Unlock()
	s.quitAll(stale)
	c, err := s.client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return nil, false, err
	}
	return &pooledConn{c: c}, true, nil
}

func (s *SMTPMailer) put(c *pooledConn) {
	c.lastUsed = time.Now()
	s.mu.Lock()
	if !s.closed {
		s.idle = append(s.idle, c)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.quitAll([]*pooledConn{c})
}

func (s *SMTPMailer) drop(c *pooledConn) { _ = c.c.Close() }

func (s *SMTPMailer) quitAll(cs []*pooledConn) {
	for _, c := range cs {
		_ = s.client.CloseWithSMTPClient(c.c)
		_ = c.c.Close()
	}
}

// Close says QUIT on every idle connection. Sends in flight finish; their
// connections are closed when they come back.
func (s *SMTPMailer) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	s.quitAll(idle)
	return nil
}

// classifySMTP sorts a go-mail send error. reusable says the connection is
// still in a known state. A nil error with the message marked delivered
// means only the clean-up after the delivery failed.
func classifySMTP(err error, msg *gomail.Msg) (out error, reusable bool) {
	var se *gomail.SendError
	if !errors.As(err, &se) {
		return temporary(0, err), false
	}
	code := se.ErrorCode()
	if msg.IsDelivered() {
		return nil, false
	}
	switch se.Reason {
	case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
		return permanent(0, err), true
	case gomail.ErrSMTPDataClose:
		// The whole message and its final dot went out; the server's answer
		// is what failed. A reply code is an answer; no code means the
		// answer was lost and the message may have been accepted.
		switch {
		case code >= 500:
			return permanent(code, err), true
		case code >= 400:
			return temporary(code, err), true
		}
		return uncertain(0, err), false
	}
	// Everything else failed before the message was complete, so nothing
	// was delivered.
	switch {
	case code >= 500:
		return permanent(code, err), true
	case code >= 400:
		return temporary(code, err), true
	}
	return temporary(0, err), false
}

func smtpCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
