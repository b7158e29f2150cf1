package listing

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Project keeps only the named members of each item's JSON form, "id"
// always among them, for the fields parameter. Names are JSON member names,
// as Params.Fields holds them.
//
// With no fields it returns items unchanged (an empty slice for nil, so
// that it encodes as []). Otherwise it returns a value that encodes as a
// JSON array of objects with the kept members in their usual order: for
// plain structs each kept field is encoded on its own, with a per-type plan
// built once from the json tags; other items (custom marshalers, maps) are
// encoded whole and their members picked from the result.
func Project[T any](items []T, fields []string) any {
	if len(fields) == 0 {
		if items == nil {
			return []T{}
		}
		return items
	}
	keep := make(map[string]bool, len(fields)+1)
	keep["id"] = true
	for _, f := range fields {
		keep[f] = true
	}
	return &projection[T]{items: items, keep: keep}
}

// projection is the result of Project with fields.
type projection[T any] struct {
	items []T
	keep  map[string]bool
}

// MarshalJSON writes the array of trimmed items.
func (p *projection[T]) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // HTML-escapes as json.Marshal does
	items := reflect.ValueOf(p.items)
	buf.WriteByte('[')
	for i := range items.Len() {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeItem(&buf, enc, items.Index(i), p.keep); err != nil {
			return nil, err
		}
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// writeItem writes the kept members of one item; enc writes to buf.
func writeItem(buf *bytes.Buffer, enc *json.Encoder, v reflect.Value, keep map[string]bool) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		v = v.Elem()
	}
	plan := planFor(v.Type())
	if plan == nil || !v.CanAddr() {
		return writeFiltered(buf, v, keep)
	}
	buf.WriteByte('{')
	n := 0
	for _, f := range plan.fields {
		if !keep[f.name] {
			continue
		}
		fv := v.FieldByIndex(f.index)
		if f.omitEmpty && isEmptyValue(fv) || f.omitZero && isZeroValue(fv) {
			continue
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(f.key)
		if f.quoted {
			buf.WriteByte('"')
		}
		// Through the address, as json.Marshal reaches the fields of slice
		// elements, so that pointer-receiver MarshalJSON methods apply.
		if err := enc.Encode(fv.Addr().Interface()); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode ends with a newline
		if f.quoted {
			buf.WriteByte('"')
		}
		n++
	}
	buf.WriteByte('}')
	return nil
}

// writeFiltered encodes v whole and writes its kept top-level members; a
// value that does not encode as an object is written unchanged.
func writeFiltered(buf *bytes.Buffer, v reflect.Value, keep map[string]bool) error {
	if v.CanAddr() {
		v = v.Addr()
	}
	data, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		buf.Write(data)
		return nil
	}
	buf.WriteByte('{')
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err = dec.Decode(&raw); err != nil {
			return err
		}
		name, _ := tok.(string)
		if !keep[name] {
			continue
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		key, err := json.Marshal(name)
		if err != nil {
			return err
		}
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(raw)
		n++
	}
	buf.WriteByte('}')
	return nil
}
