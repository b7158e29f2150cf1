package scim

import (
	"encoding/json"
	"strconv"
	"strings"

	mscim "iam/models/scim"
)

// doc is a resource as a JSON object. SCIM names are case-insensitive:
// every lookup goes through get and key.
type doc = map[string]any

// key returns the key of m equal to name ignoring case, or name.
func key(m doc, name string) string {
	if _, ok := m[name]; ok {
		return name
	}
	for k := range m {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return name
}

// get returns m's value under name ignoring case.
func get(m doc, name string) (any, bool) {
	v, ok := m[key(m, name)]
	return v, ok
}

// getString reads a string attribute: "" when absent or null; invalidValue
// when it is not a string.
func getString(m doc, name string) (string, error) {
	v, ok := get(m, name)
	if !ok || v == nil {
		return "", nil
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", invalidValue(name + " must be a string")
}

// getObject reads a complex attribute: nil when absent or null.
func getObject(m doc, name string) (doc, error) {
	v, ok := get(m, name)
	if !ok || v == nil {
		return nil, nil
	}
	o, ok := v.(doc)
	if !ok {
		return nil, invalidValue(name + " must be an object")
	}
	return o, nil
}

// getList reads a multi-valued attribute of objects: nil when absent. A
// single object is taken as a list of one.
func getList(m doc, name string) ([]doc, error) {
	v, ok := get(m, name)
	if !ok || v == nil {
		return nil, nil
	}
	if o, isObj := v.(doc); isObj {
		return []doc{o}, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, invalidValue(name + " must be a list")
	}
	if len(arr) > MaxValues {
		return nil, tooMany(name + " holds too many values")
	}
	out := make([]doc, 0, len(arr))
	for _, e := range arr {
		o, ok := e.(doc)
		if !ok {
			return nil, invalidValue(name + " must be a list of objects")
		}
		out = append(out, o)
	}
	return out, nil
}

// boolOf reads a boolean, also as the strings Entra sends ("True").
func boolOf(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(v)))
		return b, err == nil
	}
	return false, false
}

// pick returns the value of list that is primary (the last one: a value
// added as primary comes after the one it replaces), else of type typ,
// else the first; nil for an empty list.
func pick(list []doc, typ string) doc {
	for i := len(list) - 1; i >= 0; i-- {
		e := list[i]
		if v, ok := get(e, "primary"); ok {
			if b, ok := boolOf(v); ok && b {
				return e
			}
		}
	}
	for _, e := range list {
		if t, _ := getString(e, "type"); strings.EqualFold(t, typ) {
			return e
		}
	}
	if len(list) > 0 {
		return list[0]
	}
	return nil
}

// extensionOf returns the enterprise extension object of m (made when
// make is set and it is missing).
func extensionOf(m doc, create bool) doc {
	k := key(m, mscim.EnterpriseSchema)
	if o, ok := m[k].(doc); ok {
		return o
	}
	if !create {
		return nil
	}
	o := doc{}
	m[k] = o
	return o
}
