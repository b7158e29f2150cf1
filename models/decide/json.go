package decide

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the decision as a JSON object, the same as
// encoding/json would write it, by hand: an answer lists up to every policy
// with its reasons, and reflection over them cost more than the decision.
func (d *Decision) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"decision":`...)
	b = appendString(b, d.Decision)
	b = append(b, `,"policy":`...)
	if d.Policy == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"id":`...)
		b = appendString(b, d.Policy.ID)
		b = append(b, `,"name":`...)
		b = appendString(b, d.Policy.Name)
		b = append(b, '}')
	}
	for _, f := range []struct {
		name string
		v    any
		nil  bool
	}{
		{"primary_authentication", d.PrimaryAuthentication, d.PrimaryAuthentication == nil},
		{"secondary_authentication", d.SecondaryAuthentication, d.SecondaryAuthentication == nil},
		{"advanced_settings", d.AdvancedSettings, d.AdvancedSettings == nil},
		{"endpoint_advanced_settings", d.EndpointAdvancedSettings, d.EndpointAdvancedSettings == nil},
	} {
		b = append(b, ',', '"')
		b = append(b, f.name...)
		b = append(b, '"', ':')
		if f.nil {
			b = append(b, "null"...)
			continue
		}
		raw, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b = append(b, raw...)
	}
	b = append(b, `,"evaluated":[`...)
	for i := range d.Evaluated {
		e := &d.Evaluated[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"policy_id":`...)
		b = appendString(b, e.PolicyID)
		b = append(b, `,"name":`...)
		b = appendString(b, e.Name)
		b = append(b, `,"priority":`...)
		b = strconv.AppendInt(b, e.Priority, 10)
		b = append(b, `,"matched":`...)
		b = strconv.AppendBool(b, e.Matched)
		b = append(b, `,"reasons":[`...)
		for j, r := range e.Reasons {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, r.String())
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"not_assigned":`...)
	b = strconv.AppendInt(b, int64(d.NotAssigned), 10)
	return append(b, '}'), nil
}

// MarshalJSON is AppendJSON.
func (d *Decision) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil) }

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		raw, _ := json.Marshal(s) // replaces invalid bytes
		return append(b, raw...)
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
