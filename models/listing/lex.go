package listing

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// tokenKind is the kind of a lexical token of a filter.
type tokenKind int

const (
	tokEOF tokenKind = iota
	tokLParen
	tokRParen
	tokLBracket
	tokRBracket
	tokWord   // attribute path, operator, and/or/not, true/false/null
	tokString // JSON string; text is decoded
	tokNumber // JSON number; text as written
)

type token struct {
	kind tokenKind
	text string
	pos  int // 1-based character position
}

// describe names the token for an error message.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "the end of the filter"
	case tokString:
		return "the string " + quote(t.text)
	case tokNumber:
		return "the number " + t.text
	default:
		return strconv.Quote(t.text)
	}
}

// punctuation maps the one-character tokens to their kinds.
var punctuation = map[byte]tokenKind{'(': tokLParen, ')': tokRParen, '[': tokLBracket, ']': tokRBracket}

// simpleEscapes maps the character after a backslash to what it stands for.
var simpleEscapes = map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// lexer splits filter text into tokens. It keeps the byte offset and the
// character count side by side so that errors can name a character position.
type lexer struct {
	src  string
	off  int // byte offset of the next character
	char int // characters before off
}

func (l *lexer) errorf(pos int, format string, args ...any) error {
	return &FilterError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// skip moves past n ASCII bytes.
func (l *lexer) skip(n int) {
	l.off += n
	l.char += n
}

// next returns the next token.
func (l *lexer) next() (token, error) {
	for l.off < len(l.src) && isSpace(l.src[l.off]) {
		l.skip(1)
	}
	pos := l.char + 1
	if l.off >= len(l.src) {
		return token{kind: tokEOF, pos: pos}, nil
	}
	c := l.src[l.off]
	switch {
	case c == '(' || c == ')' || c == '[' || c == ']':
		l.skip(1)
		return token{kind: punctuation[c], text: string(c), pos: pos}, nil
	case c == '"':
		return l.lexString(pos)
	case c == '-' || isDigit(c):
		return l.lexNumber(pos)
	case isNameStart(c):
		start := l.off
		for l.off < len(l.src) && isNameChar(l.src[l.off]) {
			l.skip(1)
		}
		return token{kind: tokWord, text: l.src[start:l.off], pos: pos}, nil
	default:
		r, _ := utf8.DecodeRuneInString(l.src[l.off:])
		return token{}, l.errorf(pos, "unexpected character %q", r)
	}
}

// lexNumber reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (l *lexer) lexNumber(pos int) (token, error) {
	start := l.off
	bad := func() (token, error) {
		end := l.off
		for end < len(l.src) && !isDelimiter(l.src[end]) {
			end++
		}
		if text := l.src[start:end]; len(text) <= 40 {
			return token{}, l.errorf(pos, "invalid number %q", text)
		}
		return token{}, l.errorf(pos, "invalid number")
	}
	if l.peekByte() == '-' {
		l.skip(1)
	}
	switch c := l.peekByte(); {
	case c == '0':
		l.skip(1)
	case isDigit(c):
		l.skipDigits()
	default:
		return bad()
	}
	if l.peekByte() == '.' {
		l.skip(1)
		if !isDigit(l.peekByte()) {
			return bad()
		}
		l.skipDigits()
	}
	if c := l.peekByte(); c == 'e' || c == 'E' {
		l.skip(1)
		if c := l.peekByte(); c == '+' || c == '-' {
			l.skip(1)
		}
		if !isDigit(l.peekByte()) {
			return bad()
		}
		l.skipDigits()
	}
	if l.off < len(l.src) && !isDelimiter(l.src[l.off]) {
		return bad()
	}
	return token{kind: tokNumber, text: l.src[start:l.off], pos: pos}, nil
}

// lexString reads a JSON string and decodes its escapes.
func (l *lexer) lexString(pos int) (token, error) {
	l.skip(1) // opening quote
	var b strings.Builder
	for {
		if l.off >= len(l.src) {
			return token{}, l.errorf(pos, "string has no closing quote")
		}
		c := l.src[l.off]
		switch {
		case c == '"':
			l.skip(1)
			return token{kind: tokString, text: b.String(), pos: pos}, nil
		case c == '\\':
			r, err := l.lexEscape()
			if err != nil {
				return token{}, err
			}
			b.WriteRune(r)
		case c < 0x20:
			return token{}, l.errorf(l.char+1, "control character %q in a string must be escaped", rune(c))
		default:
			_, size := utf8.DecodeRuneInString(l.src[l.off:])
			b.WriteString(l.src[l.off : l.off+size])
			l.off += size
			l.char++
		}
	}
}

// lexEscape reads one escape sequence, the backslash included.
func (l *lexer) lexEscape() (rune, error) {
	pos := l.char + 1
	l.skip(1)
	if l.off >= len(l.src) {
		return 0, l.errorf(pos, "string has no closing quote")
	}
	c := l.src[l.off]
	if r, ok := simpleEscapes[c]; ok {
		l.skip(1)
		return r, nil
	}
	if c != 'u' {
		r, _ := utf8.DecodeRuneInString(l.src[l.off:])
		return 0, l.errorf(pos, `invalid escape \%c in a string`, r)
	}
	l.skip(1)
	r, ok := l.hex4()
	if !ok {
		return 0, l.errorf(pos, `\u must be followed by four hexadecimal digits`)
	}
	if utf16.IsSurrogate(r) {
		if r >= 0xdc00 || !strings.HasPrefix(l.src[l.off:], `\u`) {
			return 0, l.errorf(pos, `lone UTF-16 surrogate \u%04x in a string`, r)
		}
		l.skip(2)
		lo, ok := l.hex4()
		r = utf16.DecodeRune(r, lo)
		if !ok || r == utf8.RuneError {
			return 0, l.errorf(pos, `lone UTF-16 surrogate in a string`)
		}
	}
	if r == 0 {
		return 0, l.errorf(pos, `a string may not contain the NUL character (\u0000)`)
	}
	return r, nil
}

// hex4 reads four hexadecimal digits.
func (l *lexer) hex4() (rune, bool) {
	if len(l.src)-l.off < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(l.src[l.off:l.off+4], 16, 32)
	if err != nil {
		return 0, false
	}
	l.skip(4)
	return rune(n), true //nolint:gosec // four hex digits: at most 0xFFFF
}

func (l *lexer) peekByte() byte {
	if l.off < len(l.src) {
		return l.src[l.off]
	}
	return 0
}

func (l *lexer) skipDigits() {
	for isDigit(l.peekByte()) {
		l.skip(1)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isDelimiter reports whether c may follow a number.
func isDelimiter(c byte) bool {
	_, ok := punctuation[c]
	return ok || isSpace(c)
}

// isNameStart and isNameChar delimit a word: RFC 7644's ATTRNAME characters
// plus "$" (as in $ref), and "." and ":" so that a whole path, or a schema URI
// the parser then rejects, is one word.
func isNameStart(c byte) bool { return isAlpha(c) || c == '$' || c == '_' }
func isNameChar(c byte) bool {
	return isNameStart(c) || isDigit(c) || c == '-' || c == '.' || c == ':'
}
