// Package criteria parses and evaluates the criteria expression of a
// conditional access policy (spec 2.11, access_conditions.criteria_expression):
// a boolean expression over condition sequence numbers joined with "and" and
// "or", grouped with parentheses, for example "1 and (2 or 3)".
//
// Grammar (keywords in any case, blanks between tokens optional around
// parentheses):
//
//	expr   = term { "or" term }
//	term   = factor { "and" factor }
//	factor = number | "(" expr ")"
//	number = digit { digit }      (1 to MaxSequence, no leading zero)
//
// "and" binds tighter than "or". The parser is recursive descent, bounded
// by MaxLength characters and MaxDepth nested parentheses, so no input can
// exhaust the stack. The same Expr is what the policy store validates and
// what the decision engine evaluates (Eval).
package criteria

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits of an expression.
const (
	MaxLength   = 1000 // characters
	MaxDepth    = 32   // nested parentheses
	MaxSequence = 1000 // largest sequence number
)

// Expr is a node of a parsed expression: Ref, *And or *Or.
type Expr interface {
	// Eval reports whether the expression holds when condition n holds
	// exactly when holds(n) is true. And and Or stop at the first term
	// that decides them, left to right.
	Eval(holds func(seq int) bool) bool
	// String writes the expression back in canonical form: lower-case
	// keywords, single spaces, every and/or group of a larger expression
	// in parentheses. Parsing it gives an equal tree.
	String() string
	isExpr()
}

// Ref is a condition's sequence number.
type Ref int

// And holds when each of its two or more Terms holds.
type And struct{ Terms []Expr }

// Or holds when one of its two or more Terms holds.
type Or struct{ Terms []Expr }

func (Ref) isExpr()  {}
func (*And) isExpr() {}
func (*Or) isExpr()  {}

// Eval reports holds(r).
func (r Ref) Eval(holds func(int) bool) bool { return holds(int(r)) }

// Eval reports whether every term holds.
func (a *And) Eval(holds func(int) bool) bool {
	for _, t := range a.Terms {
		if !t.Eval(holds) {
			return false
		}
	}
	return true
}

// Eval reports whether some term holds.
func (o *Or) Eval(holds func(int) bool) bool {
	for _, t := range o.Terms {
		if t.Eval(holds) {
			return true
		}
	}
	return false
}

func (r Ref) String() string  { return strconv.Itoa(int(r)) }
func (a *And) String() string { return join(a.Terms, " and ") }
func (o *Or) String() string  { return join(o.Terms, " or ") }

func join(terms []Expr, sep string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		s := t.String()
		if _, ok := t.(Ref); !ok {
			s = "(" + s + ")"
		}
		parts[i] = s
	}
	return strings.Join(parts, sep)
}

// Refs returns the sequence numbers e names, ascending, each once.
func Refs(e Expr) []int {
	var out []int
	var walk func(Expr)
	walk = func(e Expr) {
		switch n := e.(type) {
		case Ref:
			out = append(out, int(n))
		case *And:
			for _, t := range n.Terms {
				walk(t)
			}
		case *Or:
			for _, t := range n.Terms {
				walk(t)
			}
		}
	}
	walk(e)
	slices.Sort(out)
	return slices.Compact(out)
}

// Error is a syntax error at a 1-based character position.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at character %d: %s", e.Pos, e.Msg) }

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokNum
	tokAnd
	tokOr
	tokOpen
	tokClose
)

type token struct {
	kind tokenKind
	num  int
	pos  int // 1-based
	text string
}

type parser struct {
	src   string
	i     int // next byte
	tok   token
	depth int
}

// Parse parses src. The error is an *Error naming the position and what was
// expected.
func Parse(src string) (Expr, error) {
	if len(src) > MaxLength {
		return nil, &Error{Pos: MaxLength + 1, Msg: fmt.Sprintf("the expression is longer than %d characters", MaxLength)}
	}
	p := &parser{src: src}
	if err := p.next(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, &Error{Pos: 1, Msg: "the expression is empty"}
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected(`"and", "or" or the end`)
	}
	return e, nil
}

func (p *parser) unexpected(want string) error {
	got := "the end"
	if p.tok.kind != tokEOF {
		got = strconv.Quote(p.tok.text)
	}
	return &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("expected %s, found %s", want, got)}
}

func (p *parser) next() error {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t' || p.src[p.i] == '\n' || p.src[p.i] == '\r') {
		p.i++
	}
	start := p.i
	pos := start + 1
	if p.i >= len(p.src) {
		p.tok = token{kind: tokEOF, pos: pos}
		return nil
	}
	c := p.src[p.i]
	switch {
	case c == '(':
		p.i++
		p.tok = token{kind: tokOpen, pos: pos, text: "("}
	case c == ')':
		p.i++
		p.tok = token{kind: tokClose, pos: pos, text: ")"}
	case '0' <= c && c <= '9':
		for p.i < len(p.src) && '0' <= p.src[p.i] && p.src[p.i] <= '9' {
			p.i++
		}
		text := p.src[start:p.i]
		if p.i < len(p.src) && isWordByte(p.src[p.i]) {
			return &Error{Pos: pos, Msg: fmt.Sprintf("%q is not a sequence number", p.src[start:p.wordEnd()])}
		}
		n, err := strconv.Atoi(text)
		if err != nil || n < 1 || n > MaxSequence || text[0] == '0' {
			return &Error{Pos: pos, Msg: fmt.Sprintf("%q is not a sequence number (1 to %d)", text, MaxSequence)}
		}
		p.tok = token{kind: tokNum, num: n, pos: pos, text: text}
	case isWordByte(c):
		p.i = p.wordEnd()
		word := p.src[start:p.i]
		switch strings.ToLower(word) {
		case "and":
			p.tok = token{kind: tokAnd, pos: pos, text: word}
		case "or":
			p.tok = token{kind: tokOr, pos: pos, text: word}
		default:
			return &Error{Pos: pos, Msg: fmt.Sprintf("unknown word %q: use sequence numbers, and, or, parentheses", word)}
		}
	default:
		return &Error{Pos: pos, Msg: fmt.Sprintf("unexpected character %q", string(c))}
	}
	return nil
}

func (p *parser) wordEnd() int {
	j := p.i
	for j < len(p.src) && isWordByte(p.src[j]) {
		j++
	}
	return j
}

func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c >= 0x80
}

func (p *parser) expr() (Expr, error) {
	return p.seq(tokOr, p.term, func(ts []Expr) Expr { return &Or{Terms: ts} })
}

func (p *parser) term() (Expr, error) {
	return p.seq(tokAnd, p.factor, func(ts []Expr) Expr { return &And{Terms: ts} })
}

// seq parses one or more items separated by sep; several become one node.
func (p *parser) seq(sep tokenKind, item func() (Expr, error), node func([]Expr) Expr) (Expr, error) {
	first, err := item()
	if err != nil {
		return nil, err
	}
	terms := []Expr{first}
	for p.tok.kind == sep {
		if err := p.next(); err != nil {
			return nil, err
		}
		t, err := item()
		if err != nil {
			return nil, err
		}
		terms = append(terms, t)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return node(terms), nil
}

func (p *parser) factor() (Expr, error) {
	switch p.tok.kind {
	case tokNum:
		r := Ref(p.tok.num)
		return r, p.next()
	case tokOpen:
		if p.depth >= MaxDepth {
			return nil, &Error{Pos: p.tok.pos, Msg: fmt.Sprintf("more than %d nested parentheses", MaxDepth)}
		}
		p.depth++
		if err := p.next(); err != nil {
			return nil, err
		}
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokClose {
			return nil, p.unexpected(`"and", "or" or ")"`)
		}
		p.depth--
		return e, p.next()
	default:
		return nil, p.unexpected(`a sequence number or "("`)
	}
}
