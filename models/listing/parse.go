package listing

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of ParseFilter. Together they bound the work and the stack depth
// any input can cause.
const (
	// MaxFilterLength is the longest filter accepted, in bytes.
	MaxFilterLength = 4096
	// MaxFilterDepth is how deeply parentheses, those of not (...)
	// included, may nest.
	MaxFilterDepth = 32
)

// FilterError says what is wrong with a filter and where.
type FilterError struct {
	Pos int    // 1-based character position; 0 when about the filter as a whole
	Msg string // what is wrong
}

func (e *FilterError) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("at character %d: %s", e.Pos, e.Msg)
	}
	return e.Msg
}

// ParseFilter parses a SCIM filter expression (RFC 7644 §3.4.2.2) into its
// syntax tree. See the package documentation for the grammar accepted. Every
// error is a *FilterError.
func ParseFilter(src string) (Expr, error) {
	if len(src) > MaxFilterLength {
		return nil, &FilterError{Msg: fmt.Sprintf("the filter is longer than %d bytes", MaxFilterLength)}
	}
	if !utf8.ValidString(src) {
		return nil, &FilterError{Msg: "the filter is not valid UTF-8"}
	}
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, &FilterError{Msg: "the filter is empty"}
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tokEOF:
		return e, nil
	case tokRParen:
		return nil, p.errorf(`")" has no matching "("`)
	default:
		return nil, p.errorf(`expected "and", "or" or the end of the filter, found %s`, p.tok.describe())
	}
}

// parser is a recursive-descent parser with one token of lookahead. The
// precedence, loosest first, is or, and, not; parentheses group.
type parser struct {
	lex   lexer
	tok   token // current token
	depth int   // open parentheses
}

func (p *parser) advance() (err error) {
	p.tok, err = p.lex.next()
	return err
}

// errorf reports an error at the current token.
func (p *parser) errorf(format string, args ...any) error {
	return &FilterError{Pos: p.tok.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) isWord(word string) bool {
	return p.tok.kind == tokWord && strings.EqualFold(p.tok.text, word)
}

// parseOr parses: and-expr { "or" and-expr }.
func (p *parser) parseOr() (Expr, error) {
	return p.parseSeq("or", p.parseAnd, func(terms []Expr) Expr { return &Or{Terms: terms} })
}

// parseAnd parses: unary { "and" unary }.
func (p *parser) parseAnd() (Expr, error) {
	return p.parseSeq("and", p.parseUnary, func(terms []Expr) Expr { return &And{Terms: terms} })
}

// parseSeq parses one or more terms separated by the keyword sep; two or
// more are joined into one node by join.
func (p *parser) parseSeq(sep string, term func() (Expr, error), join func([]Expr) Expr) (Expr, error) {
	var terms []Expr
	for {
		t, err := term()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
		if !p.isWord(sep) {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return join(terms), nil
}

// parseUnary parses: "not" "(" filter ")" | "(" filter ")" | attribute expression.
func (p *parser) parseUnary() (Expr, error) {
	switch {
	case p.tok.kind == tokLParen:
		return p.parseGroup()
	case p.isWord("not"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokLParen {
			return nil, p.errorf(`expected "(" after "not", found %s: write not (expression)`, p.tok.describe())
		}
		inner, err := p.parseGroup()
		if err != nil {
			return nil, err
		}
		return &Not{Expr: inner}, nil
	case p.tok.kind == tokWord && !p.isWord("and") && !p.isWord("or"):
		return p.parseAttrExpr()
	default:
		return nil, p.errorf(`expected an attribute name, "(" or "not", found %s`, p.tok.describe())
	}
}

// parseGroup parses "(" filter ")".
func (p *parser) parseGroup() (Expr, error) {
	open := p.tok
	if p.depth >= MaxFilterDepth {
		return nil, p.errorf("parentheses nest deeper than %d levels", MaxFilterDepth)
	}
	p.depth++
	if err := p.advance(); err != nil {
		return nil, err
	}
	inner, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokRParen {
		return nil, p.errorf(`expected ")" to close the "(" at character %d, found %s`, open.pos, p.tok.describe())
	}
	p.depth--
	return inner, p.advance()
}

// parseAttrExpr parses: path "pr" | path compare-op value.
func (p *parser) parseAttrExpr() (Expr, error) {
	path, err := parsePath(p.tok)
	if err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokLBracket {
		return nil, p.errorf(`value path filters such as emails[type eq "work"] are not supported`)
	}
	op := Op(strings.ToLower(p.tok.text))
	switch {
	case p.tok.kind == tokWord && op == "pr":
		return &Present{Attr: path}, p.advance()
	case p.tok.kind == tokWord && compareOps[op]:
		if err := p.advance(); err != nil {
			return nil, err
		}
		v, err := p.parseValue(op)
		if err != nil {
			return nil, err
		}
		return &Compare{Attr: path, Op: op, Value: v}, nil
	default:
		return nil, p.errorf("expected an operator (eq, ne, co, sw, ew, gt, ge, lt, le or pr) after %q, found %s",
			path.String(), p.tok.describe())
	}
}

var compareOps = map[Op]bool{Eq: true, Ne: true, Co: true, Sw: true, Ew: true, Gt: true, Ge: true, Lt: true, Le: true}

// parseValue parses a literal: string, number, true, false or null.
func (p *parser) parseValue(op Op) (Value, error) {
	v := Value{Pos: p.tok.pos}
	switch {
	case p.tok.kind == tokString:
		v.Kind, v.Text = StringValue, p.tok.text
	case p.tok.kind == tokNumber:
		v.Kind, v.Text = NumberValue, p.tok.text
	case p.isWord("true"), p.isWord("false"):
		v.Kind, v.Bool = BoolValue, p.isWord("true")
	case p.isWord("null"):
		v.Kind = NullValue
	default:
		return v, p.errorf("expected a value (a quoted string, a number, true, false or null) after %q, found %s",
			string(op), p.tok.describe())
	}
	return v, p.advance()
}

// parsePath checks a word as an attribute path: name or name.sub, each
// part an RFC 7644 ATTRNAME.
func parsePath(t token) (AttrPath, error) {
	bad := func(format string, args ...any) (AttrPath, error) {
		return AttrPath{}, &FilterError{Pos: t.pos, Msg: fmt.Sprintf(format, args...)}
	}
	if strings.Contains(t.text, ":") {
		return bad("schema URI prefixes are not supported: write the attribute name alone, not %q", t.text)
	}
	parts := strings.Split(t.text, ".")
	for _, part := range parts {
		if part == "" || !isNameStart(part[0]) {
			return bad("invalid attribute path %q", t.text)
		}
	}
	if len(parts) > 2 {
		return bad("attribute path %q has more than one sub-attribute", t.text)
	}
	path := AttrPath{Name: parts[0], Pos: t.pos}
	if len(parts) == 2 {
		path.Sub = parts[1]
	}
	return path, nil
}
