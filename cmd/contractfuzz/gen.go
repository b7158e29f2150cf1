package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// gen makes values from JSON schemas: valid ones (value) and ones that
// break exactly one rule (breakers). It is deterministic for its rand.
type gen struct {
	r *rand.Rand
	// hint gives the stored values a property or parameter takes by its
	// name (the seeded ids: user_id, group_ids, installation_key, ...), or
	// none: a valid-looking id is only valid when it names a real resource.
	hint func(name string) []any
}

// maxDepth bounds nesting: past it optional properties and array items are
// left out.
const maxDepth = 6

// value returns a value valid against s, or an error when none was found in
// a few tries (a schema the generator cannot satisfy).
func (g *gen) value(s *openapi3.Schema, name string) (any, error) {
	var last error
	for range 20 {
		// Checked as a decoder reads it; returned as made, so that an
		// integer id past 2^53 is sent with its digits.
		v := g.any(s, name, 0)
		if err := visit(s, normalize(v)); err != nil {
			last = err
			continue
		}
		return v, nil
	}
	return nil, fmt.Errorf("no valid value for %s in 20 tries: %w", describe(name), last)
}

func describe(name string) string {
	if name == "" {
		return "the body"
	}
	return name
}

// visit validates v against s as the request validator does.
func visit(s *openapi3.Schema, v any) error {
	return s.VisitJSON(v, openapi3.MultiErrors(), openapi3.VisitAsRequest())
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) any(s *openapi3.Schema, name string, depth int) any {
	if vs := g.stored(s, name); len(vs) > 0 {
		return vs[0]
	}
	// A file's contents are its example when it has one: "format: binary"
	// says nothing of the CSV or PEM a service reads in it.
	if s.Format == "binary" && s.Example != nil {
		return s.Example
	}
	if s.Example != nil && g.chance(0.2) {
		return s.Example
	}
	if len(s.Enum) > 0 {
		return s.Enum[g.r.Intn(len(s.Enum))]
	}
	if s.Nullable && g.chance(0.1) {
		return nil
	}
	switch {
	case len(s.OneOf) > 0:
		if typed(s) {
			return g.any(branch(s, s.OneOf, g.r.Intn(len(s.OneOf)), true), name, depth)
		}
		return g.merge(s, g.any(s.OneOf[g.r.Intn(len(s.OneOf))].Value, name, depth), name, depth)
	case len(s.AnyOf) > 0:
		if typed(s) {
			return g.any(branch(s, s.AnyOf, g.r.Intn(len(s.AnyOf)), false), name, depth)
		}
		return g.merge(s, g.any(s.AnyOf[g.r.Intn(len(s.AnyOf))].Value, name, depth), name, depth)
	case len(s.AllOf) > 0:
		out := map[string]any{}
		for _, sub := range s.AllOf {
			if m, ok := g.any(sub.Value, name, depth).(map[string]any); ok {
				for k, v := range m {
					out[k] = v
				}
			}
		}
		return g.merge(s, out, name, depth)
	}
	switch typeOf(s) {
	case "object":
		return g.object(s, name, depth)
	case "array":
		return g.array(s, name, depth)
	case "integer":
		return g.integer(s)
	case "number":
		return g.number(s)
	case "boolean":
		return g.chance(0.5)
	default:
		return g.str(s)
	}
}

// stored returns the seeded values hint gives for name that s accepts (an
// id as a string or, when s wants a number, as an integer).
func (g *gen) stored(s *openapi3.Schema, name string) []any {
	if g.hint == nil || name == "" {
		return nil
	}
	var out []any
	for _, v := range g.hint(name) {
		if visit(s, v) == nil {
			out = append(out, v)
		} else if id, err := strconv.ParseInt(fmt.Sprint(v), 10, 64); err == nil && visit(s, float64(id)) == nil {
			out = append(out, id)
		}
	}
	return out
}

// typed reports whether s says what it is beside its alternatives (a type
// or properties): its alternatives then only narrow it.
func typed(s *openapi3.Schema) bool {
	return len(s.Properties) > 0 || (s.Type != nil && len(*s.Type) > 0)
}

// branch is s with its i-th alternative (of its oneOf, or with exclusive
// false its anyOf) applied over it (overlay). For a oneOf, the properties
// other branches require (or this one's not forbids) are left out unless
// this branch requires them, so that one branch matches.
func branch(s *openapi3.Schema, alts openapi3.SchemaRefs, i int, exclusive bool) *openapi3.Schema {
	b := alts[i].Value
	base := *s
	if exclusive {
		base.OneOf = nil
	} else {
		base.AnyOf = nil
	}
	m := overlay(&base, b)
	if exclusive {
		own := map[string]bool{}
		for _, k := range b.Required {
			own[k] = true
		}
		var others []string
		for j, alt := range alts {
			if j != i {
				others = append(others, alt.Value.Required...)
			}
		}
		if b.Not != nil {
			for _, alt := range b.Not.Value.AnyOf {
				others = append(others, alt.Value.Required...)
			}
		}
		for _, k := range others {
			if !own[k] {
				delete(m.Properties, k)
			}
		}
	}
	return m
}

// overlay is base narrowed by over's keywords: over's type, enum, bounds,
// pattern and alternatives where it has them, both's required, and each
// property overlaid in turn.
func overlay(base, over *openapi3.Schema) *openapi3.Schema {
	m := *base
	if over.Type != nil && len(*over.Type) > 0 {
		m.Type = over.Type
	}
	if len(over.Enum) > 0 {
		m.Enum = over.Enum
	}
	m.Min, m.Max = cmpPtr(over.Min, m.Min), cmpPtr(over.Max, m.Max)
	m.MaxLength, m.MaxItems = cmpPtr(over.MaxLength, m.MaxLength), cmpPtr(over.MaxItems, m.MaxItems)
	m.MinLength, m.MinItems = max(m.MinLength, over.MinLength), max(m.MinItems, over.MinItems)
	m.Pattern = cmpOr(over.Pattern, m.Pattern)
	if over.Items != nil {
		m.Items = over.Items
	}
	if len(over.OneOf) > 0 {
		m.OneOf = over.OneOf
	}
	if len(over.AnyOf) > 0 {
		m.AnyOf = over.AnyOf
	}
	m.Required = append(append([]string(nil), base.Required...), over.Required...)
	m.Properties = openapi3.Schemas{} // a copy: branch removes some
	for k, p := range base.Properties {
		m.Properties[k] = p
	}
	for k, p := range over.Properties {
		if bp, ok := base.Properties[k]; ok && bp.Value != nil {
			m.Properties[k] = openapi3.NewSchemaRef("", overlay(bp.Value, p.Value))
		} else {
			m.Properties[k] = p
		}
	}
	return &m
}

// merge adds the properties s itself declares beside its oneOf/anyOf/allOf
// to the object the branch gave.
func (g *gen) merge(s *openapi3.Schema, branch any, name string, depth int) any {
	m, ok := branch.(map[string]any)
	if !ok || len(s.Properties) == 0 {
		return branch
	}
	for k, v := range g.object(s, name, depth) {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	return m
}

// typeOf is the schema's type, or the one its keywords imply.
func typeOf(s *openapi3.Schema) string {
	if s.Type != nil && len(*s.Type) > 0 {
		return (*s.Type)[0]
	}
	switch {
	case len(s.Properties) > 0 || s.AdditionalProperties.Schema != nil:
		return "object"
	case s.Items != nil:
		return "array"
	}
	return ""
}

// object makes an object of s; name is the object's own, and its
// properties are named after it (notification_template.id,
// device_assignment.group_ids), for hints.
func (g *gen) object(s *openapi3.Schema, name string, depth int) map[string]any {
	out := map[string]any{}
	required := map[string]bool{}
	for _, k := range s.Required {
		required[k] = true
	}
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k].Value
		if p.ReadOnly {
			continue
		}
		if required[k] || (depth < maxDepth && g.chance(0.5)) {
			out[k] = g.any(p, qualify(name, k), depth+1)
		}
	}
	// JSON Schema allows other properties unless the schema says not.
	if ap := s.AdditionalProperties; depth < maxDepth && (ap.Has == nil || *ap.Has) && g.chance(0.2) {
		k := fmt.Sprintf("x_%s", g.word(1, 8))
		if _, taken := out[k]; !taken {
			if ap.Schema != nil {
				out[k] = g.any(ap.Schema.Value, k, depth+1)
			} else {
				out[k] = g.word(0, 8)
			}
		}
	}
	return out
}

// maxBound caps the schema bounds (lengths, item counts) that values are
// built from: no request worth sending comes near it, and under it a bound
// converts to an int without overflow.
const maxBound = 1 << 20

// bound is a schema bound as an int, at most maxBound.
func bound(n uint64) int {
	if n > maxBound {
		return maxBound
	}
	return int(n)
}

func (g *gen) array(s *openapi3.Schema, name string, depth int) []any {
	lo, hi := bound(s.MinItems), bound(s.MinItems)+3
	if s.MaxItems != nil && bound(*s.MaxItems) < hi {
		hi = bound(*s.MaxItems)
	}
	if depth >= maxDepth {
		hi = lo
	}
	n := lo + g.r.Intn(hi-lo+1)
	out := make([]any, 0, n)
	seen := map[string]bool{}
	item := &openapi3.Schema{}
	if s.Items != nil {
		item = s.Items.Value
	}
	// Ids of stored resources, each once (a list naming one twice is
	// refused), as many as there are.
	if vs := g.stored(item, singular(name)); len(vs) >= lo {
		for _, i := range g.r.Perm(len(vs))[:min(n, len(vs))] {
			out = append(out, vs[i])
		}
		return out
	}
	for tries := 0; len(out) < n && tries < 10*n; tries++ {
		v := g.any(item, singular(name), depth+1)
		if s.UniqueItems {
			k := jsonText(v)
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, v)
	}
	return out
}

// qualify names property k of the object called name.
func qualify(name, k string) string {
	if name == "" {
		return k
	}
	return name + "." + k
}

// singular names an array's items for hints: user_ids → user_id.
func singular(name string) string {
	switch {
	case strings.HasSuffix(name, "_ids"):
		return strings.TrimSuffix(name, "s")
	case name == "members" || strings.HasSuffix(name, ".members"):
		return strings.TrimSuffix(name, "s")
	}
	return name
}

func (g *gen) integer(s *openapi3.Schema) any {
	lo, hi := bounds(s, -1000, 1<<31)
	lo, hi = math.Ceil(lo), math.Floor(hi)
	var v float64
	switch r := g.r.Intn(10); {
	case r == 0:
		v = lo
	case r == 1:
		v = hi
	case r < 6 && lo <= 100 && hi >= 0:
		v = math.Max(lo, 0) + float64(g.r.Intn(int(math.Min(hi, 100)-math.Max(lo, 0))+1))
	default:
		v = lo + math.Floor(g.r.Float64()*(hi-lo+1))
	}
	v = math.Min(math.Max(v, lo), hi)
	if m := s.MultipleOf; m != nil && *m > 0 {
		v = math.Ceil(v / *m) * *m
	}
	return int64(v)
}

func (g *gen) number(s *openapi3.Schema) any {
	lo, hi := bounds(s, -1e6, 1e6)
	return lo + g.r.Float64()*(hi-lo)
}

// bounds are the inclusive limits of a number schema, defaults where it has
// none.
func bounds(s *openapi3.Schema, lo, hi float64) (float64, float64) {
	if s.Min != nil {
		lo = *s.Min
		if s.ExclusiveMin.IsTrue() {
			lo++
		}
	}
	if s.Max != nil {
		hi = *s.Max
		if s.ExclusiveMax.IsTrue() {
			hi--
		}
	}
	if s.Format == "int32" && hi > math.MaxInt32 {
		hi = math.MaxInt32
	}
	return lo, hi
}

func (g *gen) str(s *openapi3.Schema) string {
	minLen, maxLen := bound(s.MinLength), bound(s.MinLength)+24
	if s.MaxLength != nil && bound(*s.MaxLength) < maxLen {
		maxLen = bound(*s.MaxLength)
	}
	switch s.Format {
	case "date-time":
		return time.Unix(1.5e9+g.r.Int63n(3e8), 0).UTC().Format(time.RFC3339)
	case "date":
		return time.Unix(1.5e9+g.r.Int63n(3e8), 0).UTC().Format(time.DateOnly)
	case "email":
		return g.word(1, 10) + "@example.com"
	case "uuid":
		b := make([]byte, 16)
		g.r.Read(b)
		return fmt.Sprintf("%x-%x-4%x-a%x-%x", b[0:4], b[4:6], b[6:8][1:], b[8:10][1:], b[10:16])
	case "ipv4":
		return fmt.Sprintf("%d.%d.%d.%d", g.r.Intn(256), g.r.Intn(256), g.r.Intn(256), g.r.Intn(256))
	case "uri":
		return "https://example.com/" + g.word(0, 10)
	}
	if s.Pattern != "" {
		if v, ok := g.matching(s.Pattern, minLen, maxLen); ok {
			return v
		}
	}
	n := minLen
	if maxLen > minLen {
		n += g.r.Intn(maxLen - minLen + 1)
	}
	return g.text(n)
}

// alphabet is what free text is made of: letters, digits, punctuation,
// spaces and a few letters outside ASCII. No control characters: the
// schema cannot say which fields take them.
var alphabet = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.,:;'!?()@/éüßΩ中")

func (g *gen) text(n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[g.r.Intn(len(alphabet))])
	}
	return b.String()
}

// word is lower-case letters and digits, lo to hi of them.
func (g *gen) word(lo, hi int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	n := lo + g.r.Intn(hi-lo+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[g.r.Intn(len(chars))]
	}
	return string(b)
}

// matching returns a string the pattern matches, of a length in
// [minLen, maxLen], or ok false.
func (g *gen) matching(pattern string, minLen, maxLen int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	check, err := regexp.Compile(pattern)
	if err != nil {
		return "", false
	}
	for range 30 {
		var b strings.Builder
		g.regex(&b, re)
		v := b.String()
		if n := len([]rune(v)); n >= minLen && n <= maxLen && check.MatchString(v) {
			return v, true
		}
	}
	return "", false
}

// regex writes a string that re matches (anchors aside).
func (g *gen) regex(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		b.WriteRune(g.classRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteRune(alphabet[g.r.Intn(len(alphabet))])
	case syntax.OpCapture:
		g.regex(b, re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			g.regex(b, sub)
		}
	case syntax.OpAlternate:
		g.regex(b, re.Sub[g.r.Intn(len(re.Sub))])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 4
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 || hi > lo+4 {
				hi = lo + 4
			}
		}
		for range lo + g.r.Intn(hi-lo+1) {
			g.regex(b, re.Sub[0])
		}
	}
}

// classRune picks a rune of a character class, printable ASCII when it has
// some.
func (g *gen) classRune(ranges []rune) rune {
	var ascii []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for c := max(ranges[i], 0x20); c <= min(ranges[i+1], 0x7e); c++ {
			ascii = append(ascii, c)
		}
	}
	if len(ascii) > 0 {
		return ascii[g.r.Intn(len(ascii))]
	}
	i := g.r.Intn(len(ranges)/2) * 2
	return ranges[i] + g.r.Int31n(ranges[i+1]-ranges[i]+1) // for a seed, the numbers Intn gives
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
