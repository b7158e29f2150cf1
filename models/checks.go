package models

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// Problems collects broken rules: the first becomes the error's field and
// detail, all of them its causes. The zero value has none.
type Problems struct{ err *Error }

// Add records a broken rule of field.
func (p *Problems) Add(field, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	if p.err == nil {
		p.err = &Error{Code: EINVALID, Field: field, Detail: detail}
	}
	p.err.Causes = append(p.err.Causes, Cause{Title: field, Detail: detail})
}

// AddOnce adds a cause for field unless field already has one: one cause
// per broken field.
func (p *Problems) AddOnce(field, format string, args ...any) {
	if p.err != nil {
		for _, c := range p.err.Causes {
			if c.Title == field {
				return
			}
		}
	}
	p.Add(field, format, args...)
}

// None reports whether no rule is broken yet.
func (p *Problems) None() bool { return p.err == nil }

// Result is the EINVALID error of the broken rules, nil when there are none.
func (p *Problems) Result() error {
	if p.err == nil {
		return nil
	}
	return p.err
}

// OneOf reports whether v is one of set.
func OneOf(v string, set []string) bool { return slices.Contains(set, v) }

// IsNoRows reports whether err says a query found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// Truncate cuts s to at most n bytes at a rune boundary; cut says whether
// it cut anything.
func Truncate(s string, n int) (t string, cut bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n], true
}
