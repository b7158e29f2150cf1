package api

import (
	"bytes"
	"encoding/json"

	"github.com/gin-gonic/gin"
)

// PATCH bodies are JSON merge patches (RFC 7396) over a resource's request
// form: members given replace, null removes, objects merge, arrays replace.
// Numbers stay json.Number throughout, so that 64-bit ids survive.

// decodePatch reads a merge patch body: a JSON object.
func decodePatch(c *gin.Context) (map[string]any, error) {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return nil, err
	}
	patch, err := jsonObject(raw)
	if err != nil {
		return nil, errInvalidBody("the body must be a JSON object")
	}
	return patch, nil
}

// mergeRequest applies patch to base (marshalled to JSON; prepare, when
// set, edits that document first) and decodes the result into out like a
// request body: unknown fields and wrong types refused, out validated.
func mergeRequest(base any, patch map[string]any, prepare func(doc map[string]any), out any) error {
	raw, err := json.Marshal(base)
	if err != nil {
		return err
	}
	doc, err := jsonObject(raw)
	if err != nil {
		return err
	}
	if prepare != nil {
		prepare(doc)
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return jsonError(err)
	}
	return validateStruct(out)
}

// jsonObject decodes a JSON object keeping numbers as json.Number.
func jsonObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errInvalidBody("the body must be a JSON object")
	}
	return obj, nil
}

// mergePatch applies an RFC 7396 merge patch to target.
func mergePatch(target any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}
