package notify

import (
	"html"
	"regexp"
	"strings"
)

// macroPattern is a %macro% placeholder: letters, digits and underscores
// between two percent signs, so that "50% off" is no macro.
var macroPattern = regexp.MustCompile(`%([A-Za-z0-9_]+)%`)

// Text is a template text compiled once and rendered many times: literal
// pieces and %macro% placeholders.
type Text struct {
	parts []textPart
}

type textPart struct {
	literal string
	macro   string // the name without the percent signs; "" for a literal
}

// Compile splits s into literals and %macro% placeholders.
func Compile(s string) Text {
	var t Text
	last := 0
	for _, m := range macroPattern.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > last {
			t.parts = append(t.parts, textPart{literal: s[last:m[0]]})
		}
		t.parts = append(t.parts, textPart{literal: s[m[0]:m[1]], macro: s[m[2]:m[3]]})
		last = m[1]
	}
	if last < len(s) {
		t.parts = append(t.parts, textPart{literal: s[last:]})
	}
	return t
}

// Macros returns the names of the macros t uses, each once, in order.
func (t Text) Macros() []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range t.parts {
		if p.macro != "" && !seen[p.macro] {
			seen[p.macro] = true
			names = append(names, p.macro)
		}
	}
	return names
}

// Render fills the macros with values (matched by name, case-sensitively).
// With escapeHTML the values are HTML-escaped, the literals never are. A
// macro without a value is left as it was written.
func (t Text) Render(values map[string]string, escapeHTML bool) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.macro == "" {
			b.WriteString(p.literal)
			continue
		}
		v, ok := values[p.macro]
		switch {
		case !ok:
			b.WriteString(p.literal)
		case escapeHTML:
			b.WriteString(html.EscapeString(v))
		default:
			b.WriteString(v)
		}
	}
	return b.String()
}

// Render fills the %macro% placeholders of s; see Text.Render.
func Render(s string, values map[string]string, escapeHTML bool) string {
	return Compile(s).Render(values, escapeHTML)
}

// BodyPlaceholder is where Wrap puts the body into an html_wrap.
const BodyPlaceholder = "{{body}}"

// Wrap puts body into wrap at its {{body}} placeholder. An empty wrap
// returns body alone.
func Wrap(wrap, body string) string {
	if strings.TrimSpace(wrap) == "" {
		return body
	}
	return strings.ReplaceAll(wrap, BodyPlaceholder, body)
}
