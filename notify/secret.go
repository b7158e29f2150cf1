package notify

import "log/slog"

// Secret is a password or token. It prints, logs and marshals as a mask, so
// that a configuration dumped by mistake shows no secret.
type Secret string

const mask = "[redacted]"

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return mask
}

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return `notify.Secret("` + s.String() + `")` }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler (JSON and other encoders).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }
