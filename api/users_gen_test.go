package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"iam/models/identity"
	"iam/models/usergen"
)

// TestUserCodeGenerated fails when users_gen.go is not what cmd/usergen
// writes from models.User's tags now: a field added or changed without go
// generate.
func TestUserCodeGenerated(t *testing.T) {
	if err := usergen.Check("api", "../models/identity/users.go", "users_gen.go"); err != nil {
		t.Fatal(err)
	}
}

// TestUserSchemas_FollowUser checks that the OpenAPI document describes
// the user as the generated code shows and takes it: User's properties
// (all required) are the view's members, UserProfile's the writable
// fields. A field added to models.User fails here until the document
// has it.
func TestUserSchemas_FollowUser(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	jsonNames := func(v any) []string {
		var names []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names
	}
	schemaNames := func(name string) []string {
		schema := doc.Components.Schemas[name]
		if schema == nil || schema.Value == nil {
			t.Fatalf("no schema %s", name)
		}
		return slices.Sorted(maps.Keys(schema.Value.Properties))
	}
	view, fields := jsonNames(userView{}), jsonNames(userFields{})
	if got := schemaNames("User"); !slices.Equal(got, view) {
		t.Errorf("schema User has\n %v\nthe API shows\n %v", got, view)
	}
	required := slices.Sorted(slices.Values(doc.Components.Schemas["User"].Value.Required))
	if !slices.Equal(required, view) {
		t.Errorf("schema User requires\n %v\nthe API always shows\n %v", required, view)
	}
	if got := schemaNames("UserProfile"); !slices.Equal(got, fields) {
		t.Errorf("schema UserProfile has\n %v\nrequests take\n %v", got, fields)
	}
}

// TestUserJSON_Golden pins the bytes a user is written as, by the page
// writer and through the view (a single user's answer), to those the
// service wrote before the view and the writer were generated.
func TestUserJSON_Golden(t *testing.T) {
	want := []string{
		`{"id":"382621712387010659","firstName":"Ann \u003c\u0026\u003e","lastName":"O\"Brien","displayName":"Ann O'Brien","email":"ann@example.com","employeeID":"E1","title":"Dr","department":"Sales","company":"ACME","description":"line\nbreak \u2028","manager":"42","city":"Köln","stateProvince":"NRW","street":"Hauptstr. 1","zipPostal":"50667","postOfficeBox":"PO 7","workLocation":"HQ","seatingLocation":"3.14","country":"DE","mobileNumber":"+49 1","homePhone":"+49 2","telephoneNumber":"+49 3","fax":"+49 4","gender":"F","language":"de-DE","container":"OU=R\\2C\\\"D\\\",DC=example","isDomainVerified":true,"status":1,"isLicensed":true,"primarySource":{"applicationName":"AD","applicationService":{"id":"ad","name":"Active Directory","serviceName":"AD","logo":"x"},"creationTime":"2026-01-02T02:04:05.0000006Z","isEnabled":true,"id":"ad-1","modifiedTime":"2026-01-02T03:04:05.0000006Z"}}`,
		`{"id":"7","firstName":"","lastName":"","displayName":"","email":"b@example.com","employeeID":"","title":"","department":"","company":"","description":"","manager":null,"city":"","stateProvince":"","street":"","zipPostal":"","postOfficeBox":"","workLocation":"","seatingLocation":"","country":"","mobileNumber":"","homePhone":"","telephoneNumber":"","fax":"","gender":"","language":"","container":"","isDomainVerified":false,"status":0,"isLicensed":false,"primarySource":{"applicationName":"IAM","applicationService":{"id":"iam","name":"iam","serviceName":"Identity and Access Management","logo":""},"creationTime":"2026-01-02T02:04:05.0000006Z","isEnabled":true,"id":"7","modifiedTime":"2026-01-02T02:04:06.0000006Z"}}`,
	}
	for i, u := range goldenUsers() {
		if got := appendUserJSON(nil, &u); string(got) != want[i] {
			t.Errorf("appendUserJSON, user %d:\n got %s\nwant %s", i, got, want[i])
		}
		got, err := json.Marshal(newUserView(&u))
		if err != nil || string(got) != want[i] {
			t.Errorf("view, user %d: %v\n got %s\nwant %s", i, err, got, want[i])
		}
	}
}

// goldenUsers are a user with every field set (awkward text, a manager, a
// primary source, times out of UTC, sign-in state that is never shown) and
// one with none.
func goldenUsers() []identity.User {
	manager := int64(42)
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	full := identity.User{ID: 382621712387010659, OrgID: 9, FirstName: "Ann <&>", LastName: "O\"Brien", DisplayName: "Ann O'Brien",
		Email: "ann@example.com", EmployeeID: "E1", Title: "Dr", Department: "Sales", Company: "ACME", Description: "line\nbreak \u2028",
		ManagerID: &manager, City: "Köln", StateProvince: "NRW", Street: "Hauptstr. 1", ZipPostal: "50667", PostOfficeBox: "PO 7",
		WorkLocation: "HQ", SeatingLocation: "3.14", Country: "DE", MobileNumber: "+49 1", HomePhone: "+49 2", TelephoneNumber: "+49 3",
		Fax: "+49 4", Gender: "F", Language: "de-DE", Container: `OU=R\2C\"D\",DC=example`, IsDomainVerified: true, Status: 1, IsLicensed: true,
		PrimarySource: &identity.PrimarySource{ID: "ad-1", ApplicationName: "AD", IsEnabled: true,
			ApplicationService: identity.ApplicationService{ID: "ad", Name: "Active Directory", ServiceName: "AD", Logo: "x"},
			CreationTime:       at, ModifiedTime: at.Add(time.Hour)},
		Role: identity.RoleAdmin, PasswordHash: "secret", CreatedAt: at, UpdatedAt: at}
	bare := identity.User{ID: 7, Email: "b@example.com", Status: 0, CreatedAt: at, UpdatedAt: at.Add(time.Second)}
	return []identity.User{full, bare}
}
