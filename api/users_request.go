package api

import (
	"bytes"
	"encoding/json"

	"iam/models"
	"iam/models/identity"
)

// userCreateRequest is the body of POST /users: firstName and email are
// required; status defaults to 1 and isLicensed to true.
type userCreateRequest struct {
	userFields
	Password *string `json:"password"`
}

// userPatchRequest is the body of PATCH /users/{id}.
type userPatchRequest struct {
	userFields
	Password *string `json:"password"`
}

// optionalRef is a user id field that tells absent, null and a value apart.
type optionalRef struct {
	Set   bool
	Value string // "" for null
}

// UnmarshalJSON reads null or a digit string (a number is accepted too).
func (r *optionalRef) UnmarshalJSON(b []byte) error {
	r.Set = true
	if bytes.Equal(b, []byte("null")) {
		r.Value = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return models.Invalid("manager", "must be a user id (a digit string) or null")
		}
		s = n.String()
	}
	r.Value = s
	return nil
}

// check: firstName and email are required to create (not to patch, which
// shares the fields).
func (r *userCreateRequest) check() error {
	var causes []models.Cause
	for _, f := range []struct {
		name  string
		value *string
	}{{"firstName", r.FirstName}, {"email", r.Email}} {
		if f.value == nil || *f.value == "" {
			causes = append(causes, models.Cause{Title: f.name, Detail: "is required"})
		}
	}
	if len(causes) > 0 {
		return &models.Error{Code: models.EINVALID, Field: causes[0].Title, Detail: causes[0].Detail, Causes: causes}
	}
	return nil
}

// user builds the user to create in org from the request (decodeJSON has
// checked it).
func (r *userCreateRequest) user(orgID int64) (*identity.User, error) {
	u := &identity.User{OrgID: orgID, Status: identity.UserActive, IsLicensed: true, Role: identity.RoleUser}
	if err := r.apply(u); err != nil {
		return nil, err
	}
	if r.Password == nil {
		r.Password = new(string)
	}
	return u, nil
}
