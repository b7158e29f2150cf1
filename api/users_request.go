package api

import (
	"bytes"
	"encoding/json"

	"iam/models"
)

// userFields are the writable fields of a user (spec 2.1: all but id,
// isDomainVerified and primarySource), as POST /users and PATCH
// /users/{id} take them. An absent field is nil; PATCH changes only the
// fields present.
type userFields struct {
	FirstName       *string     `json:"firstName"`
	LastName        *string     `json:"lastName"`
	DisplayName     *string     `json:"displayName"`
	Email           *string     `json:"email"`
	EmployeeID      *string     `json:"employeeID"`
	Title           *string     `json:"title"`
	Department      *string     `json:"department"`
	Company         *string     `json:"company"`
	Description     *string     `json:"description"`
	Manager         optionalRef `json:"manager"`
	City            *string     `json:"city"`
	StateProvince   *string     `json:"stateProvince"`
	Street          *string     `json:"street"`
	ZipPostal       *string     `json:"zipPostal"`
	PostOfficeBox   *string     `json:"postOfficeBox"`
	WorkLocation    *string     `json:"workLocation"`
	SeatingLocation *string     `json:"seatingLocation"`
	Country         *string     `json:"country"`
	MobileNumber    *string     `json:"mobileNumber"`
	HomePhone       *string     `json:"homePhone"`
	TelephoneNumber *string     `json:"telephoneNumber"`
	Fax             *string     `json:"fax"`
	Gender          *string     `json:"gender"`
	Language        *string     `json:"language"`
	Status          *int        `json:"status"`
	IsLicensed      *bool       `json:"isLicensed"`
	Password        *string     `json:"password"`
}

// userCreateRequest is the body of POST /users: firstName and email are
// required; status defaults to 1 and isLicensed to true.
type userCreateRequest struct{ userFields }

// userPatchRequest is the body of PATCH /users/{id}.
type userPatchRequest struct{ userFields }

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
func (r *userCreateRequest) user(orgID int64) (*models.User, error) {
	u := &models.User{OrgID: orgID, Status: models.UserActive, IsLicensed: true, Role: models.RoleUser}
	if err := r.apply(u); err != nil {
		return nil, err
	}
	if r.Password == nil {
		r.Password = new(string)
	}
	return u, nil
}

// apply copies the fields present onto u.
func (f *userFields) apply(u *models.User) error {
	for _, p := range []struct {
		src *string
		dst *string
	}{
		{f.FirstName, &u.FirstName}, {f.LastName, &u.LastName}, {f.DisplayName, &u.DisplayName},
		{f.Email, &u.Email}, {f.EmployeeID, &u.EmployeeID}, {f.Title, &u.Title},
		{f.Department, &u.Department}, {f.Company, &u.Company}, {f.Description, &u.Description},
		{f.City, &u.City}, {f.StateProvince, &u.StateProvince}, {f.Street, &u.Street},
		{f.ZipPostal, &u.ZipPostal}, {f.PostOfficeBox, &u.PostOfficeBox}, {f.WorkLocation, &u.WorkLocation},
		{f.SeatingLocation, &u.SeatingLocation}, {f.Country, &u.Country}, {f.MobileNumber, &u.MobileNumber},
		{f.HomePhone, &u.HomePhone}, {f.TelephoneNumber, &u.TelephoneNumber}, {f.Fax, &u.Fax},
		{f.Gender, &u.Gender}, {f.Language, &u.Language},
	} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	if f.Status != nil {
		u.Status = *f.Status
	}
	if f.IsLicensed != nil {
		u.IsLicensed = *f.IsLicensed
	}
	if f.Manager.Set {
		u.ManagerID = nil
		if f.Manager.Value != "" {
			id, err := models.ParseID("manager", f.Manager.Value)
			if err != nil {
				return models.Invalid("manager", "must be a user id (a digit string) or null")
			}
			u.ManagerID = &id
		}
	}
	return nil
}
