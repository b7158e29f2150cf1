package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"iam/models"
)

// Text rule: no string of a request body (a JSON member name or value, a
// multipart text field) may hold the NUL character or be anything but valid
// Unicode in UTF-8: raw bytes that are not UTF-8, or a JSON escape of a lone
// UTF-16 surrogate; nor the text \u0000 (textEscapedNUL). PostgreSQL stores neither (text and jsonb refuse NUL),
// and Go's JSON decoder silently turns the others into U+FFFD. The rule is
// kept here, in the decoders every body goes through (decodeRequest,
// readUploadForm, readCAForm), so a new field cannot forget it; the answer
// is 400 naming the field.

// maxTextDepth bounds the nesting checkText follows; deeper bodies are left
// to the decoder, which refuses them.
const maxTextDepth = 10000

// Problems a string can have, as the error's detail says them.
const (
	textNUL       = "must not contain the NUL character (\\u0000)"
	textNotUTF8   = "must be valid UTF-8 text"
	textSurrogate = "must be valid Unicode text (it holds a lone UTF-16 surrogate escape)"
	// The six characters \u0000 as text: the database layer (bun's JSON
	// quoting) writes them into a JSON column as the escape of a NUL, which
	// PostgreSQL refuses (SQLSTATE 22P05).
	textEscapedNUL = "must not contain the text \\u0000"
)

// checkText refuses a JSON body one of whose strings breaks the text rule,
// naming the field ("facts.name", "local_accounts[0].user_name"). The
// usual body costs one pass for UTF-8 and one for `\u` escapes; only a
// body with a suspect escape or bytes is walked token by token to find the
// field. A body that is not JSON passes: the decoder explains it.
func checkText(body []byte) error {
	if utf8.Valid(body) && !suspectEscape(body) {
		return nil
	}
	return findBadText(body)
}

// suspectEscape reports whether body holds `\u0000` or an escape of a
// surrogate (`\uD800`–`\uDFFF`, which is fine only as a pair).
func suspectEscape(body []byte) bool {
	for {
		i := bytes.Index(body, []byte(`\u`))
		if i < 0 || i+6 > len(body) {
			return false
		}
		hex := body[i+2 : i+6]
		if string(hex) == "0000" || (hex[0]|0x20) == 'd' && strings.IndexByte("89abcdefABCDEF", hex[1]) >= 0 {
			return true
		}
		body = body[i+2:]
	}
}

// textFrame is one open object or array of findBadText's walk: the member
// or the index it is at.
type textFrame struct {
	object  bool
	wantKey bool
	key     string
	index   int
}

// findBadText walks body's tokens and returns the error of its first
// string that breaks the text rule, or nil.
func findBadText(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []textFrame
	var prev int64
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or not JSON: decoding reports it
		}
		end := dec.InputOffset()
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxTextDepth {
					return nil
				}
				stack = append(stack, textFrame{object: t == '{', wantKey: t == '{'})
			default:
				stack = stack[:top]
				afterValue(stack)
			}
		case string:
			// The literal is the token's raw bytes: what lies between the
			// previous token and this one is only white space, ':' or ','.
			lit := body[prev:end]
			lit = lit[bytes.IndexByte(lit, '"'):]
			isKey := top >= 0 && stack[top].object && stack[top].wantKey
			if isKey {
				stack[top].key, stack[top].wantKey = t, false
			}
			problem := literalProblem(lit)
			if problem == "" && strings.Contains(t, `\u0000`) {
				problem = textEscapedNUL
			}
			if problem != "" {
				return models.Invalid(textPath(stack), "%s", problem)
			}
			if !isKey {
				afterValue(stack)
			}
		default:
			afterValue(stack)
		}
		prev = end
	}
}

// afterValue moves the innermost open object or array past a value.
func afterValue(stack []textFrame) {
	if len(stack) == 0 {
		return
	}
	top := &stack[len(stack)-1]
	if top.object {
		top.wantKey = true
	} else {
		top.index++
	}
}

// textPath names the member the walk is at, as validation errors name
// fields: "facts.name", "accounts[2].user_name"; "body" at the top.
func textPath(stack []textFrame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// literalProblem checks a JSON string literal, quotes included.
func literalProblem(lit []byte) string {
	if !utf8.Valid(lit) {
		return textNotUTF8
	}
	for i := 1; i < len(lit)-1; i++ {
		if lit[i] != '\\' {
			continue
		}
		if lit[i+1] != 'u' {
			i++ // a one-character escape
			continue
		}
		r := hexRune(lit[i+2:])
		switch {
		case r == 0:
			return textNUL
		case r >= 0xD800 && r < 0xDC00: // high surrogate: a low one must follow
			if i+12 >= len(lit) || lit[i+6] != '\\' || lit[i+7] != 'u' {
				return textSurrogate
			}
			if lo := hexRune(lit[i+8:]); lo < 0xDC00 || lo > 0xDFFF {
				return textSurrogate
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return textSurrogate
		default:
			i += 5
		}
	}
	return ""
}

// hexRune reads the four hex digits of a \u escape (-1 when they are not).
func hexRune(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

// textProblem checks a text value that is not JSON (a multipart form
// field): "" when it keeps the text rule.
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return textNotUTF8
	case strings.IndexByte(s, 0) >= 0:
		return textNUL
	}
	return ""
}
