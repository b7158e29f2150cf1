package scim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MaxFilterLen caps a filter's length in bytes; MaxFilterDepth the nesting
// of its parentheses, not and value paths.
const (
	MaxFilterLen   = 4096
	MaxFilterDepth = 16
)

// Path names an attribute: an optional schema URN
// (urn:ietf:params:scim:schemas:extension:enterprise:2.0:User), the
// attribute and an optional sub-attribute (name.givenName). Names keep the
// case they were written in and match case-insensitively.
type Path struct {
	URN  string
	Attr string
	Sub  string
}

// String writes p back as filter text.
func (p Path) String() string {
	s := p.Attr
	if p.URN != "" {
		s = p.URN + ":" + s
	}
	if p.Sub != "" {
		s += "." + p.Sub
	}
	return s
}

// Expr is a node of a parsed filter: *Logical, *Not, *Compare or
// *ValuePath.
type Expr interface{ isExpr() }

// Logical is "and" or "or" of two expressions.
type Logical struct {
	Op          string // "and" or "or"
	Left, Right Expr
}

// Not is not (X).
type Not struct{ X Expr }

// Compare compares an attribute with a value, or tests its presence (Op
// "pr", Value unused). Op is lower case.
type Compare struct {
	Path  Path
	Op    string
	Value Value
}

// ValuePath is attr[filter]: a multi-valued attribute one of whose values
// matches Filter (whose paths name sub-attributes). Sub is the
// sub-attribute after the brackets in a PATCH path (emails[type eq
// "work"].value); always empty in a filter.
type ValuePath struct {
	Path   Path
	Filter Expr
	Sub    string
}

func (*Logical) isExpr()   {}
func (*Not) isExpr()       {}
func (*Compare) isExpr()   {}
func (*ValuePath) isExpr() {}

// Value is a comparison's literal: a string, a number (its text), a
// boolean or null.
type Value struct {
	Kind string // "string", "number", "bool" or "null"
	Text string // the string, or the number's text
	Bool bool
}

// operators are the comparison operators of RFC 7644 §3.4.2.2.
var operators = map[string]bool{"eq": true, "ne": true, "co": true, "sw": true, "ew": true, "gt": true, "ge": true, "lt": true, "le": true}

// FilterError is a filter that does not parse (SCIM invalidFilter) or a
// PATCH path that does not (invalidPath).
type FilterError struct{ Msg string }

func (e *FilterError) Error() string { return e.Msg }

type tokKind int

const (
	tEOF tokKind = iota
	tWord
	tString
	tNumber
	tLParen
	tRParen
	tLBrack
	tRBrack
)

type token struct {
	kind tokKind
	text string
	pos  int
}

type parser struct {
	src   string
	pos   int
	tok   token
	depth int
}

func (p *parser) errorf(format string, args ...any) error {
	return &FilterError{Msg: fmt.Sprintf("at character %d: ", p.tok.pos+1) + fmt.Sprintf(format, args...)}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$' || c == ':' || c == '.' || c == '+'
}

// next reads the next token into p.tok.
func (p *parser) next() error {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tEOF, pos: start}
		return nil
	}
	c := p.src[p.pos]
	switch {
	case c == '(':
		p.pos++
		p.tok = token{kind: tLParen, text: "(", pos: start}
	case c == ')':
		p.pos++
		p.tok = token{kind: tRParen, text: ")", pos: start}
	case c == '[':
		p.pos++
		p.tok = token{kind: tLBrack, text: "[", pos: start}
	case c == ']':
		p.pos++
		p.tok = token{kind: tRBrack, text: "]", pos: start}
	case c == '"':
		end := p.pos + 1
		for end < len(p.src) && p.src[end] != '"' {
			if p.src[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(p.src) {
			p.tok = token{pos: start}
			return p.errorf("unterminated string")
		}
		var s string
		if err := json.Unmarshal([]byte(p.src[start:end+1]), &s); err != nil {
			p.tok = token{pos: start}
			return p.errorf("invalid string literal")
		}
		p.pos = end + 1
		p.tok = token{kind: tString, text: s, pos: start}
	case isWordByte(c):
		end := p.pos
		for end < len(p.src) && isWordByte(p.src[end]) {
			end++
		}
		w := p.src[start:end]
		p.pos = end
		kind := tWord
		if c == '-' || c >= '0' && c <= '9' {
			var f float64
			if err := json.Unmarshal([]byte(w), &f); err == nil {
				kind = tNumber
			}
		}
		p.tok = token{kind: kind, text: w, pos: start}
	default:
		p.tok = token{pos: start}
		return p.errorf("unexpected character %q", c)
	}
	return nil
}

// ParseFilter parses a SCIM filter (RFC 7644 §3.4.2.2): the comparison
// operators, pr, and, or, not, parentheses and value paths, attribute names
// optionally prefixed by their schema's URN. Errors are *FilterError.
func ParseFilter(src string) (Expr, error) {
	if len(src) > MaxFilterLen {
		return nil, &FilterError{Msg: fmt.Sprintf("the filter is longer than %d bytes", MaxFilterLen)}
	}
	p := &parser{src: src}
	if err := p.next(); err != nil {
		return nil, err
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errorf("unexpected %q", p.tok.text)
	}
	return e, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxFilterDepth {
		return p.errorf("the filter nests deeper than %d levels", MaxFilterDepth)
	}
	return nil
}

func (p *parser) isWord(w string) bool {
	return p.tok.kind == tWord && strings.EqualFold(p.tok.text, w)
}

func (p *parser) parseOr() (Expr, error) {
	left, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isWord("or") {
		if err := p.next(); err != nil {
			return nil, err
		}
		right, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		left = &Logical{Op: "or", Left: left, Right: right}
	}
	return left, nil
}

func (p *parser) parseAnd() (Expr, error) {
	left, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isWord("and") {
		if err := p.next(); err != nil {
			return nil, err
		}
		right, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		left = &Logical{Op: "and", Left: left, Right: right}
	}
	return left, nil
}

func (p *parser) parseNot() (Expr, error) {
	if !p.isWord("not") {
		return p.parseAtom()
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLParen {
		return nil, p.errorf("not must be followed by a parenthesized filter")
	}
	x, err := p.parseAtom()
	if err != nil {
		return nil, err
	}
	return &Not{X: x}, nil
}

func (p *parser) parseAtom() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if p.tok.kind == tLParen {
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errorf("missing )")
		}
		return e, p.next()
	}
	if p.tok.kind != tWord {
		return nil, p.errorf("expected an attribute name")
	}
	path, err := ParsePathName(p.tok.text)
	if err != nil {
		return nil, p.errorf("%s", err.Error())
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tLBrack {
		if path.Sub != "" {
			return nil, p.errorf("a value path names an attribute, not a sub-attribute")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		inner, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRBrack {
			return nil, p.errorf("missing ]")
		}
		vp := &ValuePath{Path: path, Filter: inner}
		// A sub-attribute after the brackets belongs to PATCH paths; the
		// lexer reads it as a word starting with ".".
		if p.pos < len(p.src) && p.src[p.pos] == '.' {
			if err := p.next(); err != nil {
				return nil, err
			}
			sub := strings.TrimPrefix(p.tok.text, ".")
			if sub == "" || strings.ContainsAny(sub, ".:") {
				return nil, p.errorf("invalid sub-attribute after ]")
			}
			vp.Sub = sub
		}
		return vp, p.next()
	}
	if p.tok.kind != tWord {
		return nil, p.errorf("expected an operator after %s", path)
	}
	op := strings.ToLower(p.tok.text)
	if op == "pr" {
		return &Compare{Path: path, Op: op}, p.next()
	}
	if !operators[op] {
		return nil, p.errorf("unknown operator %q", p.tok.text)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var v Value
	switch {
	case p.tok.kind == tString:
		v = Value{Kind: "string", Text: p.tok.text}
	case p.tok.kind == tNumber:
		v = Value{Kind: "number", Text: p.tok.text}
	case p.isWord("true"), p.isWord("false"):
		v = Value{Kind: "bool", Bool: strings.EqualFold(p.tok.text, "true")}
	case p.isWord("null"):
		v = Value{Kind: "null"}
	default:
		return nil, p.errorf("expected a value after %s", op)
	}
	return &Compare{Path: path, Op: op, Value: v}, p.next()
}

// ParsePathName splits an attribute name, optionally prefixed by a schema
// URN, into a Path: "name.givenName", "emails",
// "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value".
func ParsePathName(s string) (Path, error) {
	var p Path
	rest := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p.URN, rest = s[:i], s[i+1:]
		if !strings.HasPrefix(strings.ToLower(p.URN), "urn:") {
			return Path{}, fmt.Errorf("invalid attribute name %q", s)
		}
	}
	attr, sub, _ := strings.Cut(rest, ".")
	if !validName(attr) || (sub != "" || strings.HasSuffix(rest, ".")) && !validName(sub) {
		return Path{}, fmt.Errorf("invalid attribute name %q", s)
	}
	p.Attr, p.Sub = attr, sub
	return p, nil
}

// validName reports whether s is an ATTRNAME of RFC 7643 §2.1.
func validName(s string) bool {
	if s == "" || !isAlpha(s[0]) && s[0] != '$' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ParsePatchPath parses a PATCH operation's path (RFC 7644 §3.5.2):
// attrPath, or valuePath with an optional sub-attribute
// (members[value eq "2819c223"], emails[type eq "work"].value). It returns
// the path and, for a value path, its filter. Errors are *FilterError.
func ParsePatchPath(src string) (Path, *ValuePath, error) {
	src = strings.TrimSpace(src)
	if len(src) > MaxFilterLen {
		return Path{}, nil, &FilterError{Msg: "the path is too long"}
	}
	if !strings.Contains(src, "[") {
		path, err := ParsePathName(src)
		if err != nil {
			return Path{}, nil, &FilterError{Msg: err.Error()}
		}
		return path, nil, nil
	}
	p := &parser{src: src}
	if err := p.next(); err != nil {
		return Path{}, nil, err
	}
	e, err := p.parseAtom()
	if err != nil {
		return Path{}, nil, err
	}
	vp, ok := e.(*ValuePath)
	if !ok || p.tok.kind != tEOF {
		return Path{}, nil, &FilterError{Msg: "invalid path " + src}
	}
	return vp.Path, vp, nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
