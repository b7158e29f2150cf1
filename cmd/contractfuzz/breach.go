package main

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// A breach is a value that breaks one rule of a schema: where (a JSON
// pointer-like path) and which rule, and the whole value with the break.
type breach struct {
	where, why string
	value      any
}

// breaches returns the ways to break one rule of s in v, a value valid
// against s: a wrong type, an enum, length, pattern or range broken, a
// required property left out, an unknown property added, too few or too
// many items. Each is checked to fail validation against s (a break that
// another branch of a oneOf accepts is dropped).
func breaches(s *openapi3.Schema, v any) []breach {
	var out []breach
	for _, b := range breachesAt(s, v, "") {
		b.value = normalize(b.value)
		if visit(s, b.value) != nil {
			out = append(out, b)
		}
	}
	// The whole body null: only a nullable body takes it.
	if !s.Nullable && visit(s, nil) != nil {
		out = append(out, breach{where: "/", why: "null instead of " + typeName(s), value: nil})
	}
	return out
}

func breachesAt(s *openapi3.Schema, v any, where string) []breach {
	s = effective(s, v)
	var out []breach
	add := func(why string, x any) {
		out = append(out, breach{where: cmpOr(where, "/"), why: why, value: x})
	}
	if len(s.Enum) > 0 {
		add("a value outside the enum", "not-in-enum")
	}
	switch x := v.(type) {
	case string:
		add("a number instead of a string", 12345)
		if s.MinLength > 0 {
			add(fmt.Sprintf("shorter than minLength %d", s.MinLength), strings.Repeat("a", bound(s.MinLength)-1))
		}
		if s.MaxLength != nil && *s.MaxLength < maxBound {
			add(fmt.Sprintf("longer than maxLength %d", *s.MaxLength), strings.Repeat("a", bound(*s.MaxLength)+1))
		}
		if s.Pattern != "" {
			for _, c := range []string{"not matching!", "", " ", "-1", "0", "a\tb"} {
				if visit(&openapi3.Schema{Pattern: s.Pattern}, c) != nil {
					add("not matching the pattern "+s.Pattern, c)
					break
				}
			}
		}
		if s.Format == "date-time" {
			add("not a date-time", "yesterday")
		}
	case float64, int64, int:
		add("a string instead of a number", "abc")
		if typeOf(s) == "integer" {
			add("not an integer", 1.5)
		}
		if s.Min != nil {
			add(fmt.Sprintf("below minimum %v", *s.Min), *s.Min-1)
		}
		if s.Max != nil {
			add(fmt.Sprintf("above maximum %v", *s.Max), *s.Max+1)
		}
	case bool:
		add("a string instead of a boolean", "true")
	case []any:
		add("an object instead of an array", map[string]any{})
		if s.MinItems > 0 {
			add(fmt.Sprintf("fewer than minItems %d", s.MinItems), x[:s.MinItems-1])
		}
		if s.MaxItems != nil && *s.MaxItems < 2000 && len(x) > 0 {
			more := make([]any, *s.MaxItems+1)
			for i := range more {
				more[i] = x[0]
			}
			add(fmt.Sprintf("more than maxItems %d", *s.MaxItems), more)
		}
		if len(x) > 0 && s.Items != nil {
			for _, b := range breachesAt(s.Items.Value, x[0], where+"/0") {
				cp := append([]any{b.value}, x[1:]...)
				out = append(out, breach{where: b.where, why: b.why, value: cp})
			}
		}
	case map[string]any:
		add("an array instead of an object", []any{})
		for _, k := range s.Required {
			if _, ok := x[k]; ok {
				add("required property "+k+" left out", without(x, k))
			}
		}
		if ap := s.AdditionalProperties; ap.Has != nil && !*ap.Has {
			add("an unknown property (additionalProperties: false)", with(x, "unknown_property", 1))
		}
		for _, k := range sortedKeys(x) {
			p := s.Properties[k]
			if p == nil {
				continue
			}
			for _, b := range breachesAt(p.Value, x[k], where+"/"+k) {
				out = append(out, breach{where: b.where, why: b.why, value: with(x, k, b.value)})
			}
		}
	}
	return out
}

// effective is the schema v is checked against: for allOf the parts'
// properties together, for oneOf and anyOf the first branch v matches
// (with the properties s declares beside it).
func effective(s *openapi3.Schema, v any) *openapi3.Schema {
	var parts openapi3.SchemaRefs
	switch {
	case len(s.AllOf) > 0:
		parts = s.AllOf
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		for _, b := range append(append(openapi3.SchemaRefs{}, s.OneOf...), s.AnyOf...) {
			if visit(b.Value, v) == nil {
				parts = openapi3.SchemaRefs{b}
				break
			}
		}
		if parts == nil {
			return s
		}
	default:
		return s
	}
	m := *s
	m.AllOf, m.OneOf, m.AnyOf = nil, nil, nil
	m.Properties = openapi3.Schemas{}
	for k, p := range s.Properties {
		m.Properties[k] = p
	}
	for _, part := range parts {
		p := effective(part.Value, v)
		for k, ps := range p.Properties {
			m.Properties[k] = ps
		}
		m.Required = append(m.Required, p.Required...)
		if m.Type == nil {
			m.Type = p.Type
		}
		if p.AdditionalProperties.Has != nil {
			m.AdditionalProperties = p.AdditionalProperties
		}
		if len(p.Enum) > 0 {
			m.Enum = p.Enum
		}
		m.Pattern, m.MinLength, m.MaxLength = cmpOr(m.Pattern, p.Pattern), max(m.MinLength, p.MinLength), cmpPtr(m.MaxLength, p.MaxLength)
		m.Min, m.Max = cmpPtr(m.Min, p.Min), cmpPtr(m.Max, p.Max)
		m.MinItems, m.MaxItems = max(m.MinItems, p.MinItems), cmpPtr(m.MaxItems, p.MaxItems)
		if m.Items == nil {
			m.Items = p.Items
		}
	}
	return &m
}

func typeName(s *openapi3.Schema) string {
	if t := typeOf(s); t != "" {
		return "a value of type " + t
	}
	return "a value"
}

func without(m map[string]any, k string) map[string]any {
	out := make(map[string]any, len(m))
	for key, v := range m {
		if key != k {
			out[key] = v
		}
	}
	return out
}

func with(m map[string]any, k string, v any) map[string]any {
	out := without(m, k)
	out[k] = v
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cmpPtr[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}
