package notify

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	gomail "github.com/wneessen/go-mail"
)

// buildMsg turns m into a go-mail message from the sender from: the HTML
// and text alternatives, inline images (data: URIs of the HTML included),
// attachments, the priority headers of its severity, and its Message-ID.
func buildMsg(from string, m *Message) (*gomail.Msg, error) {
	if len(m.To) == 0 {
		return nil, errors.New("the message has no recipient")
	}
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := msg.From(from); err != nil {
		return nil, fmt.Errorf("sender %q: %w", from, err)
	}
	if err := msg.To(m.To...); err != nil {
		return nil, fmt.Errorf("recipient: %w", err)
	}
	if len(m.Cc) > 0 {
		if err := msg.Cc(m.Cc...); err != nil {
			return nil, fmt.Errorf("copy recipient: %w", err)
		}
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	if m.MessageID != "" {
		msg.SetMessageIDWithValue(m.MessageID)
	} else {
		msg.SetMessageID()
	}
	sev := m.Severity
	if sev == "" {
		sev = SeverityMedium
	}
	for k, v := range sev.PriorityHeaders() {
		msg.SetGenHeader(gomail.Header(k), v)
	}
	for k, v := range m.Headers {
		msg.SetGenHeader(gomail.Header(k), v)
	}

	htmlBody, dataImages := InlineDataImages(m.HTML)
	text := m.Text
	if text == "" && htmlBody != "" {
		text = HTMLToText(htmlBody)
	}
	switch {
	case htmlBody != "":
		msg.SetBodyString(gomail.TypeTextPlain, text)
		msg.AddAlternativeString(gomail.TypeTextHTML, htmlBody)
	default:
		msg.SetBodyString(gomail.TypeTextPlain, text)
	}
	for _, f := range append(append([]File(nil), m.Inline...), dataImages...) {
		if f.ContentID == "" {
			return nil, fmt.Errorf("inline image %q has no content id", f.Name)
		}
		msg.EmbedReadSeeker(fileName(f), bytes.NewReader(f.Data),
			gomail.WithFileContentID("<"+strings.Trim(f.ContentID, "<>")+">"), gomail.WithFileContentType(contentType(f)))
	}
	for _, f := range m.Attachments {
		msg.AttachReadSeeker(fileName(f), bytes.NewReader(f.Data), gomail.WithFileContentType(contentType(f)))
	}
	return msg, nil
}

func fileName(f File) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 {
			return '_'
		}
		return r
	}, f.Name)
	if name == "" {
		return "file" + extensionFor(f.ContentType)
	}
	return name
}

func contentType(f File) gomail.ContentType {
	if mt, _, err := mime.ParseMediaType(f.ContentType); err == nil {
		return gomail.ContentType(mt)
	}
	return "application/octet-stream"
}
