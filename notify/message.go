package notify

import (
	"strings"
)

// Message is one rendered mail.
type Message struct {
	// To and Cc are the addresses the message is for. Every one of them
	// receives it; delivery is all or nothing.
	To, Cc  []string
	Subject string
	// HTML and Text are the two alternative bodies. Either may be empty;
	// an empty Text is derived from HTML.
	HTML, Text string
	Severity   Severity
	// Inline are images the HTML shows as cid:<ContentID>.
	Inline []File
	// Attachments are files attached to the message.
	Attachments []File
	// MessageID, when set, is the Message-ID (without angle brackets). A
	// stable id per delivery lets mail systems recognise a duplicate.
	MessageID string
	// Headers are extra header fields (X-…).
	Headers map[string]string
}

// File is an attachment or an inline image.
type File struct {
	Name        string
	ContentType string
	// ContentID is the id an inline image is referred to by (cid:<id>).
	ContentID string
	Data      []byte
}

// Severity is a message's priority (spec 2.18: LOW, MEDIUM, HIGH).
type Severity string

// The severities.
const (
	SeverityLow    Severity = "LOW"
	SeverityMedium Severity = "MEDIUM"
	SeverityHigh   Severity = "HIGH"
)

// ParseSeverity reads a severity in any case (the interface writes both
// LOW and low). An empty one is MEDIUM.
func ParseSeverity(s string) (Severity, bool) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "LOW":
		return SeverityLow, true
	case "MEDIUM", "":
		return SeverityMedium, true
	case "HIGH":
		return SeverityHigh, true
	}
	return "", false
}

// PriorityHeaders are the header fields that carry a severity to mail
// clients: X-Priority (1 highest … 5 lowest), Importance (RFC 2156),
// Priority (RFC 2156) and X-MSMail-Priority (Outlook).
func (s Severity) PriorityHeaders() map[string]string {
	switch s {
	case SeverityLow:
		return map[string]string{"X-Priority": "5 (Lowest)", "Importance": "low", "Priority": "non-urgent", "X-MSMail-Priority": "Low"}
	case SeverityHigh:
		return map[string]string{"X-Priority": "1 (Highest)", "Importance": "high", "Priority": "urgent", "X-MSMail-Priority": "High"}
	}
	return map[string]string{"X-Priority": "3 (Normal)", "Importance": "normal", "Priority": "normal", "X-MSMail-Priority": "Normal"}
}
