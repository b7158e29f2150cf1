package api

import (
	"bytes"
	"encoding/json"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/gin-gonic/gin"
)

// PATCH bodies are JSON merge patches (RFC 7396) over a resource's request
// form: members given replace, null removes, objects merge, arrays replace.
// jsonpatch.MergePatch keeps every value it does not merge as the bytes it
// was given, so numbers (64-bit ids) reach the request struct exactly.

// decodePatch reads a merge patch body: a JSON object.
func decodePatch(c *gin.Context) ([]byte, error) {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return nil, err
	}
	if _, err := jsonObject(raw); err != nil {
		return nil, errInvalidBody("the body must be a JSON object")
	}
	return raw, nil
}

// mergeRequest applies patch to base (marshalled to JSON; prepare, when
// set, edits that document first, seeing the patch as an object) and decodes the result into out like a
// request body (decodeRequest): unknown fields and wrong types refused, out
// validated.
func mergeRequest(base any, patch []byte, prepare func(doc, patch map[string]any), out any) error {
	raw, err := json.Marshal(base)
	if err != nil {
		return err
	}
	if prepare != nil {
		var doc, p map[string]any
		if doc, err = jsonObject(raw); err != nil {
			return err
		}
		if p, err = jsonObject(patch); err != nil {
			return err
		}
		prepare(doc, p)
		if raw, err = json.Marshal(doc); err != nil {
			return err
		}
	}
	merged, err := jsonpatch.MergePatch(raw, patch)
	if err != nil {
		return errInvalidBody("the body is not a JSON merge patch")
	}
	return decodeRequest(bytes.NewReader(merged), out)
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
