package enrollment

import (
	"encoding/base32"
	"errors"
	"net/mail"
	"strings"
)

// Rules for the enrollment data of one CSV row. Each returns the value to
// store (normalized) or an error whose text is shown as the row's message.

// NormalizeOTPEmail checks an email address for Email OTP: a bare
// name@domain address.
func NormalizeOTPEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("is empty")
	}
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || !strings.Contains(s, "@") || len(s) > 254 {
		return "", errors.New("is not an email address")
	}
	return s, nil
}

// NormalizeE164 checks a mobile number for SMS OTP and returns it in E.164
// form (+ then 7 to 15 digits, no leading zero). Spaces, dashes, dots and
// parentheses between the digits are dropped.
func NormalizeE164(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("is empty")
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '+' && i == 0:
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '.' || r == '(' || r == ')':
		default:
			return "", errors.New("is not a phone number in E.164 form (+14155550123)")
		}
	}
	out := b.String()
	digits := strings.TrimPrefix(out, "+")
	if !strings.HasPrefix(out, "+") || len(digits) < 7 || len(digits) > 15 || digits[0] == '0' {
		return "", errors.New("is not a phone number in E.164 form (+14155550123)")
	}
	return out, nil
}

// totpSecretEncoding is RFC 4648 base32 without padding.
var totpSecretEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NormalizeTOTPSecret checks a TOTP shared secret: RFC 4648 base32 (case,
// spaces and padding ignored) of 10 to 64 bytes (80 to 512 bits). It
// returns the canonical upper-case form without padding.
func NormalizeTOTPSecret(s string) (string, error) {
	s = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	s = strings.TrimRight(s, "=")
	if s == "" {
		return "", errors.New("is empty")
	}
	raw, err := totpSecretEncoding.DecodeString(s)
	if err != nil {
		return "", errors.New("is not base32 (letters A-Z and digits 2-7)")
	}
	if len(raw) < 10 || len(raw) > 64 {
		return "", errors.New("must hold 80 to 512 bits (16 to 103 base32 characters)")
	}
	return s, nil
}
