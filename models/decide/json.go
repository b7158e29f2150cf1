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
	var pre [4][]byte // written at compile time
	if d.st != nil && d.ev != nil && d.ev.decided >= 0 {
		pre = [4][]byte{d.st.primaryJSON, d.st.secondaryJSON, d.ev.snap.policies[d.ev.decided].advJSON, d.st.advJSON}
	}
	for k, f := range []struct {
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
		if pre[k] != nil {
			b = append(b, pre[k]...)
			continue
		}
		raw, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b = append(b, raw...)
	}
	b = append(b, `,"evaluated":[`...)
	if d.ev != nil {
		var small [16]reason
		scratch := small[:0]
		first := true
		d.ev.considered(func(p *policy, matched bool) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, p.headJSON...)
			b = strconv.AppendBool(b, matched)
			b = append(b, `,"reasons":`...)
			b, scratch = d.ev.appendReasons(b, p, matched, scratch)
			b = append(b, '}')
		})
	}
	b = append(b, `],"not_assigned":`...)
	b = strconv.AppendInt(b, int64(d.NotAssigned), 10)
	return append(b, '}'), nil
}

// MarshalJSON is AppendJSON (on a value too: a Decision marshalled by
// value still lists what it evaluated).
func (d Decision) MarshalJSON() ([]byte, error) { return d.AppendJSON(nil) }

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
