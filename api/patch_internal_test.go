package api

import (
	"errors"
	"strings"
	"testing"

	"iam/models"
)

// TestMergeRequest: a PATCH body merges over the request form as RFC 7396
// says (members replace, null removes, objects merge, arrays replace),
// 64-bit ids stay exact, and the result is decoded and validated like a
// request body.
func TestMergeRequest(t *testing.T) {
	type inner struct {
		A string `json:"a,omitempty"`
		B string `json:"b,omitempty"`
	}
	type form struct {
		Name   string  `json:"name" validate:"required"`
		Note   *string `json:"note"`
		IDs    []int64 `json:"ids"`
		Inner  *inner  `json:"inner"`
		Number int64   `json:"number"`
	}
	note := "kept"
	base := form{Name: "old", Note: &note, IDs: []int64{1, 2}, Inner: &inner{A: "a", B: "b"}, Number: 5}

	var out form
	patch := `{"name":"new","note":null,"ids":[9007199254740993],"inner":{"b":null,"a":"A"},"number":9223372036854775807}`
	if err := mergeRequest(base, []byte(patch), nil, &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != "new" || out.Note != nil || len(out.IDs) != 1 || out.IDs[0] != 9007199254740993 ||
		out.Inner == nil || *out.Inner != (inner{A: "A"}) || out.Number != 9223372036854775807 {
		t.Errorf("merged: %+v (inner %+v)", out, out.Inner)
	}

	out = form{}
	if err := mergeRequest(base, []byte(`{}`), nil, &out); err != nil || out.Name != "old" || out.IDs[1] != 2 || out.Number != 5 {
		t.Errorf("an empty patch: %+v, %v", out, err)
	}

	out = form{}
	err := mergeRequest(base, []byte(`{"name":null}`), nil, &out)
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != "name" {
		t.Errorf("removing a required member: %v, want name is required", err)
	}
	err = mergeRequest(base, []byte(`{"colour":"red"}`), nil, &out)
	if !errors.As(err, &me) || me.Field != "colour" {
		t.Errorf("an unknown member: %v, want colour is not a known field", err)
	}
	err = mergeRequest(base, []byte(`{"ids":"1"}`), nil, &out)
	if !errors.As(err, &me) || me.Field != "ids" {
		t.Errorf("a wrong type: %v, want ids must be of type array", err)
	}

	out = form{}
	err = mergeRequest(base, []byte(`{"ids":[3]}`), func(doc, patch map[string]any) {
		if _, ok := patch["ids"]; ok {
			doc["name"] = "prepared"
		}
	}, &out)
	if err != nil || out.Name != "prepared" || out.IDs[0] != 3 {
		t.Errorf("prepare: %+v, %v", out, err)
	}
}

// TestDecodeRequest_Checks: a request struct's own rules (check) run on the
// one decoding path, after its tags: POST /users without firstName and
// email names both.
func TestDecodeRequest_Checks(t *testing.T) {
	var req userCreateRequest
	err := decodeRequest(strings.NewReader(`{"lastName":"Doe"}`), &req)
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != "firstName" || len(me.Causes) != 2 || me.Causes[1].Title != "email" {
		t.Fatalf("decoding a user without firstName and email: %v", err)
	}
	req = userCreateRequest{}
	if err := decodeRequest(strings.NewReader(`{"firstName":"Jane","email":"jane@example.com"}`), &req); err != nil {
		t.Errorf("a complete user: %v", err)
	}
	var patch userPatchRequest
	if err := decodeRequest(strings.NewReader(`{"lastName":"Doe"}`), &patch); err != nil {
		t.Errorf("a patch needs neither: %v", err)
	}
}

// TestDecodeRequest_FieldDecoderError: a field that decodes itself
// (optionalRef) names the field in the answer rather than the body being
// called invalid JSON.
func TestDecodeRequest_FieldDecoderError(t *testing.T) {
	var req userCreateRequest
	err := decodeRequest(strings.NewReader(`{"firstName":"J","email":"j@example.com","manager":true}`), &req)
	var me *models.Error
	if !errors.As(err, &me) || me.Code != models.EINVALID || me.Field != "manager" {
		t.Fatalf("manager: true gives %v, want manager must be a user id", err)
	}
}
