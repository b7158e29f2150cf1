package listing

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// jsonPlan lists the members encoding/json writes for a struct type, in
// its order, so that Project can encode only the kept ones.
type jsonPlan struct {
	fields []planField
}

type planField struct {
	name      string
	key       []byte // the encoded name and a colon
	index     []int  // for reflect.Value.FieldByIndex
	omitEmpty bool
	omitZero  bool
	quoted    bool // the ",string" option on a number or boolean
}

var plans sync.Map // reflect.Type -> *jsonPlan; nil: encode whole

// planFor returns the plan of t, or nil when t is not a struct whose
// encoding this simple model reproduces exactly: types with their own
// marshalers, embedded pointers, ",string" on strings and pointers,
// clashing names.
func planFor(t reflect.Type) *jsonPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*jsonPlan)
	}
	var plan *jsonPlan
	if t.Kind() == reflect.Struct && !hasMarshaler(t) {
		if fields, ok := planFields(t, nil); ok && uniqueNames(fields) {
			plan = &jsonPlan{fields: fields}
		}
	}
	plans.Store(t, plan)
	return plan
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()
)

func hasMarshaler(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(marshalerType) || pt.Implements(marshalerType) ||
		t.Implements(textMarshalerType) || pt.Implements(textMarshalerType)
}

// planFields walks t's fields depth-first, as encoding/json orders them.
func planFields(t reflect.Type, index []int) ([]planField, bool) {
	var fields []planField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		idx := append(slices.Clone(index), i)
		if sf.Anonymous {
			if name != "" || sf.Type.Kind() != reflect.Struct || hasMarshaler(sf.Type) {
				return nil, false
			}
			sub, ok := planFields(sf.Type, idx)
			if !ok {
				return nil, false
			}
			fields = append(fields, sub...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		quoted, ok := stringOption(sf.Type, opts)
		if !ok || !validTagName(name) {
			return nil, false
		}
		key, err := json.Marshal(name)
		if err != nil {
			return nil, false
		}
		fields = append(fields, planField{
			name:      name,
			key:       append(key, ':'),
			index:     idx,
			omitEmpty: hasOption(opts, "omitempty"),
			omitZero:  hasOption(opts, "omitzero"),
			quoted:    quoted,
		})
	}
	return fields, true
}

// stringOption tells whether the ",string" option quotes a field of type t:
// it does for numbers and booleans and is ignored for composite kinds. ok
// is false where this plan would not match encoding/json (strings,
// pointers, types with marshalers).
func stringOption(t reflect.Type, opts string) (quoted, ok bool) {
	if !hasOption(opts, "string") {
		return false, true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true, !hasMarshaler(t)
	case reflect.Struct, reflect.Slice, reflect.Array, reflect.Map, reflect.Interface:
		return false, true
	}
	return false, false
}

func uniqueNames(fields []planField) bool {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if seen[f.name] {
			return false
		}
		seen[f.name] = true
	}
	return true
}

func hasOption(opts, name string) bool {
	for opt := range strings.SplitSeq(opts, ",") {
		if opt == name {
			return true
		}
	}
	return false
}

// validTagName is encoding/json's rule for a member name given in a tag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// isEmptyValue is encoding/json's omitempty test.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZeroValue is encoding/json's omitzero test: an IsZero method when the
// type has one, the zero value otherwise. v is addressable.
func isZeroValue(v reflect.Value) bool {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() ||
			v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Implements(isZeroerType):
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	case reflect.PointerTo(t).Implements(isZeroerType):
		return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
	}
	return v.IsZero()
}
