package scim

import (
	"strconv"
	"strings"

	"iam/api/jsonout"
	"iam/models"
	"iam/models/identity"
	mscim "iam/models/scim"
)

// The users of a list without attributes or excludedAttributes are
// written by appendUserJSON rather than built as a doc (userDoc) and
// encoded: building a map for each user and encoding it took 40% of a
// page's CPU time. It writes the same bytes as
// appendJSON(userDoc(c, u, groups)) (TestAppendUserJSON_MatchesUserDoc):
// every key in encoding/json's order, the same attributes left out.

// appendUserJSON appends the SCIM User of u (groups nil: left out) to b,
// its locations under base (resourceBase).
func appendUserJSON(b []byte, base string, u *identity.User, groups []mscim.GroupRef) []byte {
	b = strconv.AppendBool(append(b, `{"active":`...), u.Status == identity.UserActive)
	if u.Street+u.City+u.StateProvince+u.ZipPostal+u.Country != "" {
		b = append(b, `,"addresses":[{`...)
		n := len(b)
		b = appendFields(b, true, "country", u.Country, "locality", u.City, "postalCode", u.ZipPostal)
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, `"primary":true`...)
		b = appendFields(b, false, "region", u.StateProvince, "streetAddress", u.Street)
		b = append(b, `,"type":"work"}]`...)
	}
	b = jsonout.AppendString(append(b, `,"displayName":`...), u.DisplayName)
	b = jsonout.AppendString(append(b, `,"emails":[{"primary":true,"type":"work","value":`...), u.Email)
	b = append(b, "}]"...)
	b = appendFields(b, false, "externalId", u.ExternalID)
	if groups != nil {
		b = append(b, `,"groups":[`...)
		for i := range groups {
			if i > 0 {
				b = append(b, ',')
			}
			id := models.FormatID(groups[i].ID)
			b = jsonout.AppendString(append(b, `{"$ref":`...), base+"Groups/"+id)
			b = jsonout.AppendString(append(b, `,"display":`...), groups[i].Name)
			b = jsonout.AppendString(append(b, `,"type":"direct","value":`...), id)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	id := models.FormatID(u.ID)
	b = jsonout.AppendString(append(b, `,"id":`...), id)
	b = appendFields(b, false, "locale", u.Language)
	b = jsonout.AppendTimeUTC(append(b, `,"meta":{"created":`...), u.CreatedAt)
	b = jsonout.AppendTimeUTC(append(b, `,"lastModified":`...), u.UpdatedAt)
	b = jsonout.AppendString(append(b, `,"location":`...), base+"Users/"+id)
	b = jsonout.AppendString(append(b, `,"resourceType":"User","version":`...), userVersion(u))
	b = jsonout.AppendString(append(b, `},"name":{"familyName":`...), u.LastName)
	b = jsonout.AppendString(append(b, `,"formatted":`...), strings.TrimSpace(u.FirstName+" "+u.LastName))
	b = jsonout.AppendString(append(b, `,"givenName":`...), u.FirstName)
	b = append(b, '}')
	if u.MobileNumber+u.TelephoneNumber+u.HomePhone+u.Fax != "" {
		b = append(b, `,"phoneNumbers":[`...)
		first := true
		for _, p := range [...]struct{ typ, v string }{{"mobile", u.MobileNumber}, {"work", u.TelephoneNumber}, {"home", u.HomePhone}, {"fax", u.Fax}} {
			if p.v == "" {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(append(append(b, `{"type":"`...), p.typ...), `","value":`...)
			b = append(jsonout.AppendString(b, p.v), '}')
		}
		b = append(b, ']')
	}
	b = appendFields(b, false, "preferredLanguage", u.Language)
	b = append(b, `,"schemas":["`+mscim.UserSchema+`","`+mscim.EnterpriseSchema+`"]`...)
	b = appendFields(b, false, "title", u.Title)
	if u.EmployeeID+u.Department+u.Company != "" || u.ManagerID != nil {
		b = append(b, `,"`+mscim.EnterpriseSchema+`":{`...)
		n := len(b)
		b = appendFields(b, true, "department", u.Department, "employeeNumber", u.EmployeeID)
		if u.ManagerID != nil {
			if len(b) > n {
				b = append(b, ',')
			}
			mid := models.FormatID(*u.ManagerID)
			b = jsonout.AppendString(append(b, `"manager":{"$ref":`...), base+"Users/"+mid)
			b = append(jsonout.AppendString(append(b, `,"value":`...), mid), '}')
		}
		b = appendFields(b, len(b) == n, "organization", u.Company)
		b = append(b, '}')
	}
	b = jsonout.AppendString(append(b, `,"userName":`...), u.UserName)
	return append(b, '}')
}

// appendFields appends the pairs of kv (name, value) whose value is not
// empty as JSON members, each after a comma but the first when first is
// true (the first member of an object).
func appendFields(b []byte, first bool, kv ...string) []byte {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(append(append(b, '"'), kv[i]...), `":`...)
		b = jsonout.AppendString(b, kv[i+1])
	}
	return b
}

// appendUserListJSON appends the ListResponse of users (with groups by
// user id when groups is not nil) as appendJSON(listResponse(…)) would.
func appendUserListJSON(b []byte, base string, total, startIndex int, users []identity.User, groups map[int64][]mscim.GroupRef) []byte {
	b = append(b, `{"Resources":[`...)
	for i := range users {
		if i > 0 {
			b = append(b, ',')
		}
		var g []mscim.GroupRef
		if groups != nil {
			if g = groups[users[i].ID]; g == nil {
				g = []mscim.GroupRef{}
			}
		}
		b = appendUserJSON(b, base, &users[i], g)
	}
	b = strconv.AppendInt(append(b, `],"itemsPerPage":`...), int64(len(users)), 10)
	b = strconv.AppendInt(append(b, `,"schemas":["`+ListSchema+`"],"startIndex":`...), int64(max(startIndex, 1)), 10)
	b = strconv.AppendInt(append(b, `,"totalResults":`...), int64(total), 10)
	return append(b, '}')
}
