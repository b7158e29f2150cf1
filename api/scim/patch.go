package scim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	mscim "iam/models/scim"
)

// PatchSchema is the URN of a PATCH request.
const PatchSchema = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

// patchOp is one operation of a PATCH request.
type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// decodePatch reads a PATCH request's operations: invalidSyntax for a
// body that is not one, tooMany past MaxOperations.
func decodePatch(c *gin.Context) ([]patchOp, error) {
	var req struct {
		Schemas    []string  `json:"schemas"`
		Operations []patchOp `json:"Operations"`
	}
	if err := decode(c, &req); err != nil {
		return nil, err
	}
	if len(req.Operations) == 0 {
		return nil, invalidSyntax("a PATCH request needs Operations")
	}
	if len(req.Operations) > MaxOperations {
		return nil, tooMany(fmt.Sprintf("a PATCH request holds at most %d operations", MaxOperations))
	}
	for i := range req.Operations {
		op := strings.ToLower(strings.TrimSpace(req.Operations[i].Op))
		if op != "add" && op != "remove" && op != "replace" {
			return nil, invalidSyntax(fmt.Sprintf("operation %d: op must be add, remove or replace", i+1))
		}
		req.Operations[i].Op = op // Entra sends "Replace", "Add"
	}
	return req.Operations, nil
}

// patchRules says what of a resource a PATCH may touch.
type patchRules struct {
	// readOnly attributes (lower case) answer mutability when a path names
	// them, and are ignored as keys of a path-less value.
	readOnly map[string]bool
	// extension is the URN whose attributes live in an object of their own.
	extension string
	// core is the resource's core schema URN (allowed as a path prefix).
	core string
}

var userPatchRules = patchRules{
	readOnly:  map[string]bool{"id": true, "meta": true, "groups": true, "schemas": true},
	extension: mscim.EnterpriseSchema,
	core:      mscim.UserSchema,
}

// decodeValue reads an operation's value as JSON (nil when absent).
func decodeValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, invalidSyntax("an operation's value is not JSON")
	}
	return v, nil
}

// applyPatch applies ops to d in order.
func applyPatch(d doc, ops []patchOp, rules patchRules) error {
	for i, op := range ops {
		v, err := decodeValue(op.Value)
		if err != nil {
			return err
		}
		if err := applyOp(d, op.Op, strings.TrimSpace(op.Path), v, rules); err != nil {
			return fmt.Errorf("operation %d: %w", i+1, err)
		}
	}
	return nil
}

func applyOp(d doc, op, path string, v any, rules patchRules) error {
	if strings.EqualFold(path, "password") {
		return nil // passwordOf took it
	}
	if path == "" {
		if op == "remove" {
			return noTarget("remove needs a path")
		}
		m, ok := v.(doc)
		if !ok {
			return invalidValue("an operation without a path needs an object value")
		}
		for k, sub := range m {
			lk := strings.ToLower(k)
			switch {
			case rules.readOnly[lk] || lk == "password":
				continue
			case strings.EqualFold(k, rules.extension):
				obj, ok := sub.(doc)
				if !ok {
					return invalidValue(k + " must be an object")
				}
				for k2, v2 := range obj {
					if err := applyAt(d, op, mscim.Path{URN: rules.extension, Attr: k2}, nil, v2, rules); err != nil {
						return err
					}
				}
				continue
			}
			p, err := mscim.ParsePathName(k)
			if err != nil {
				return invalidPath(err.Error())
			}
			if err := applyAt(d, op, p, nil, sub, rules); err != nil {
				return err
			}
		}
		return nil
	}
	p, vp, err := mscim.ParsePatchPath(path)
	if err != nil {
		return invalidPath(err.Error())
	}
	if p.URN == "" && rules.readOnly[strings.ToLower(p.Attr)] {
		return mutability(p.Attr + " is read-only")
	}
	return applyAt(d, op, p, vp, v, rules)
}

// applyAt applies one operation at path p (a value path vp when not nil).
func applyAt(d doc, op string, p mscim.Path, vp *mscim.ValuePath, v any, rules patchRules) error {
	container := d
	switch {
	case p.URN == "" || strings.EqualFold(p.URN, rules.core):
	case rules.extension != "" && strings.EqualFold(p.URN, rules.extension):
		container = extensionOf(d, op != "remove")
		if container == nil {
			return nil
		}
	default:
		return invalidPath("unknown schema " + p.URN)
	}
	k := key(container, p.Attr)
	if vp != nil {
		return applyFiltered(container, k, op, vp, v)
	}
	if p.Sub != "" {
		obj, _ := container[k].(doc)
		if obj == nil {
			if op == "remove" {
				return nil
			}
			obj = doc{}
			container[k] = obj
		}
		sk := key(obj, p.Sub)
		if op == "remove" {
			delete(obj, sk)
		} else {
			obj[sk] = v
		}
		return nil
	}
	cur, exists := container[k]
	switch op {
	case "remove":
		if list, ok := cur.([]any); ok && v != nil {
			// Remove the values given (by value), as some clients send.
			remove, _ := v.([]any)
			container[k] = without(list, remove)
			return nil
		}
		delete(container, k)
	case "add":
		switch cur := cur.(type) {
		case []any:
			add, ok := v.([]any)
			if !ok {
				add = []any{v}
			}
			if len(add) > MaxValues {
				return tooMany(p.Attr + " holds too many values")
			}
			container[k] = union(cur, add)
		case doc:
			if m, ok := v.(doc); ok && exists {
				merge(cur, m)
				return nil
			}
			container[k] = v
		default:
			container[k] = v
		}
	case "replace":
		if cur, ok := cur.(doc); ok {
			if m, ok := v.(doc); ok {
				merge(cur, m) // sub-attributes not given stay (RFC 7644 §3.5.2.3)
				return nil
			}
		}
		container[k] = v
	}
	return nil
}

// applyFiltered applies an operation to the values of the multi-valued
// attribute container[k] that vp's filter matches. An add or replace that
// matches none adds a value made of the filter's eq conditions (Entra
// replaces phoneNumbers[type eq "mobile"].value of a user without one).
func applyFiltered(container doc, k, op string, vp *mscim.ValuePath, v any) error {
	list, _ := container[k].([]any)
	matched := false
	out := make([]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(doc)
		if !ok || !matches(vp.Filter, m) {
			out = append(out, e)
			continue
		}
		matched = true
		switch {
		case op == "remove" && vp.Sub == "":
			continue // drop the value
		case op == "remove":
			delete(m, key(m, vp.Sub))
		case vp.Sub != "":
			m[key(m, vp.Sub)] = v
		default:
			if obj, ok := v.(doc); ok {
				merge(m, obj)
			} else {
				return invalidValue("a value path's value must be an object")
			}
		}
		out = append(out, m)
	}
	if !matched && op != "remove" {
		e := eqConditions(vp.Filter)
		if e == nil {
			return noTarget("no value matches the path's filter")
		}
		if vp.Sub != "" {
			e[vp.Sub] = v
		} else if obj, ok := v.(doc); ok {
			merge(e, obj)
		}
		out = append(out, e)
	}
	container[k] = out
	return nil
}

// eqConditions returns the object the eq conditions of an and-only filter
// describe ({"type": "mobile"}), nil for any other filter.
func eqConditions(e mscim.Expr) doc {
	switch e := e.(type) {
	case *mscim.Compare:
		if e.Op != "eq" || e.Path.Sub != "" {
			return nil
		}
		switch e.Value.Kind {
		case "string":
			return doc{e.Path.Attr: e.Value.Text}
		case "bool":
			return doc{e.Path.Attr: e.Value.Bool}
		}
	case *mscim.Logical:
		if e.Op != "and" {
			return nil
		}
		l, r := eqConditions(e.Left), eqConditions(e.Right)
		if l == nil || r == nil {
			return nil
		}
		merge(l, r)
		return l
	}
	return nil
}

// matches evaluates a value filter on one value of a multi-valued
// attribute (names ignoring case, strings compared ignoring case).
func matches(e mscim.Expr, m doc) bool {
	switch e := e.(type) {
	case *mscim.Logical:
		if e.Op == "and" {
			return matches(e.Left, m) && matches(e.Right, m)
		}
		return matches(e.Left, m) || matches(e.Right, m)
	case *mscim.Not:
		return !matches(e.X, m)
	case *mscim.Compare:
		v, ok := get(m, e.Path.Attr)
		if e.Op == "pr" {
			return ok && v != nil && v != ""
		}
		return compareValue(v, e.Op, e.Value)
	}
	return false
}

func compareValue(v any, op string, want mscim.Value) bool {
	switch want.Kind {
	case "bool":
		b, ok := boolOf(v)
		if !ok {
			b = false // an absent boolean is false
		}
		return (b == want.Bool) == (op == "eq")
	case "null":
		return (v == nil) == (op == "eq")
	case "number":
		f, err := strconv.ParseFloat(want.Text, 64)
		got, ok := v.(float64)
		if err != nil || !ok {
			return op == "ne"
		}
		return cmpOrdered(got, f, op)
	}
	s, ok := v.(string)
	if !ok {
		if n, isNum := v.(float64); isNum {
			s = strconv.FormatFloat(n, 'f', -1, 64)
		} else {
			return op == "ne"
		}
	}
	a, b := strings.ToLower(s), strings.ToLower(want.Text)
	switch op {
	case "co":
		return strings.Contains(a, b)
	case "sw":
		return strings.HasPrefix(a, b)
	case "ew":
		return strings.HasSuffix(a, b)
	}
	return cmpOrdered(a, b, op)
}

func cmpOrdered[T string | float64](a, b T, op string) bool {
	switch op {
	case "eq":
		return a == b
	case "ne":
		return a != b
	case "gt":
		return a > b
	case "ge":
		return a >= b
	case "lt":
		return a < b
	case "le":
		return a <= b
	}
	return false
}

// merge copies src's keys into dst (matching dst's keys ignoring case).
func merge(dst, src doc) {
	for k, v := range src {
		dst[key(dst, k)] = v
	}
}

// sameValue reports whether two values of a multi-valued attribute are one:
// the same "value" (ignoring case), or equal.
func sameValue(a, b any) bool {
	am, aok := a.(doc)
	bm, bok := b.(doc)
	if aok && bok {
		av, _ := get(am, "value")
		bv, _ := get(bm, "value")
		if as, ok := av.(string); ok {
			if bs, ok := bv.(string); ok {
				return strings.EqualFold(as, bs)
			}
		}
	}
	return reflect.DeepEqual(a, b)
}

// union appends the values of add not in list yet (no duplicates).
func union(list, add []any) []any {
	out := list
	for _, a := range add {
		dup := false
		for _, e := range out {
			if sameValue(e, a) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}

// without returns list without the values in remove.
func without(list, remove []any) []any {
	out := make([]any, 0, len(list))
	for _, e := range list {
		gone := false
		for _, r := range remove {
			if sameValue(e, r) {
				gone = true
				break
			}
		}
		if !gone {
			out = append(out, e)
		}
	}
	return out
}
