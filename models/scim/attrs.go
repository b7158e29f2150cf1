package scim

import (
	"strings"
)

// The schema URNs of RFC 7643.
const (
	UserSchema       = "urn:ietf:params:scim:schemas:core:2.0:User"
	GroupSchema      = "urn:ietf:params:scim:schemas:core:2.0:Group"
	EnterpriseSchema = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
)

// colKind is how a column compares.
type colKind int

const (
	kindText   colKind = iota + 1 // text compared ignoring case
	kindExact                     // text compared exactly (caseExact)
	kindID                        // an id, written as a digit string
	kindActive                    // status 1/0 shown as a boolean
	kindTime                      // a timestamp
	kindConst                     // a constant of a virtual row (type, primary)
)

// column is what one attribute is in SQL: a column (or a constant of a
// multi-valued attribute's value row) and how it compares.
type column struct {
	expr  string // the column, qualified; empty for a constant
	kind  colKind
	value any // the constant of kindConst: a string or a bool
	// partial marks a column whose index leaves out empty values (WHERE
	// col <> ''): a comparison that cannot match '' says so too, so that
	// the planner may use the index.
	partial bool
}

// valueRow is one value of a multi-valued attribute that the user row holds
// in columns: its sub-attributes by lower-case name.
type valueRow map[string]column

// resource is the attribute allow-list of a resource type.
type resource struct {
	schema string
	// single are the single-valued attributes (and sub-attributes, as
	// "name.givenname"), by lower-case name, for filters and sortBy.
	single map[string]column
	// multi are the multi-valued attributes held in columns, each a list of
	// value rows.
	multi map[string][]valueRow
	// extension are the enterprise extension's attributes, by lower-case
	// name; nil for groups.
	extension map[string]column
}

func text(expr string) column  { return column{expr: expr, kind: kindText} }
func exact(expr string) column { return column{expr: expr, kind: kindExact} }
func constant(v any) column    { return column{kind: kindConst, value: v} }

// userResource maps the SCIM User attributes to the users table
// (docs/scim.md has the table).
var userResource = &resource{
	schema: UserSchema,
	single: map[string]column{
		"id":                {expr: "u.id", kind: kindID},
		"username":          {expr: "u.user_name", kind: kindText, partial: true},
		"externalid":        exact("u.external_id"),
		"displayname":       text("u.display_name"),
		"name.givenname":    text("u.first_name"),
		"name.familyname":   text("u.last_name"),
		"name.formatted":    text("u.display_name"),
		"title":             text("u.title"),
		"preferredlanguage": text("u.language"),
		"locale":            text("u.language"),
		"active":            {expr: "u.status", kind: kindActive},
		"meta.created":      {expr: "u.created_at", kind: kindTime},
		"meta.lastmodified": {expr: "u.updated_at", kind: kindTime},
	},
	multi: map[string][]valueRow{
		"emails": {{"value": {expr: "u.email", kind: kindText, partial: true}, "type": constant("work"), "primary": constant(true)}},
		"phonenumbers": {
			{"value": text("u.mobile_number"), "type": constant("mobile")},
			{"value": text("u.telephone_number"), "type": constant("work")},
			{"value": text("u.home_phone"), "type": constant("home")},
			{"value": text("u.fax"), "type": constant("fax")},
		},
		"addresses": {{
			"type": constant("work"), "primary": constant(true),
			"streetaddress": text("u.street"), "locality": text("u.city"), "region": text("u.state_province"),
			"postalcode": text("u.zip_postal"), "country": text("u.country"),
		}},
	},
	extension: map[string]column{
		"employeenumber": text("u.employee_id"),
		"department":     text("u.department"),
		"organization":   text("u.company"),
		"manager":        {expr: "u.manager_id", kind: kindID},
		"manager.value":  {expr: "u.manager_id", kind: kindID},
	},
}

// groupResource maps the SCIM Group attributes to the groups table;
// members are matched through group_members (membersFilter).
var groupResource = &resource{
	schema: GroupSchema,
	single: map[string]column{
		"id":                {expr: "g.id", kind: kindID},
		"displayname":       text("g.name"),
		"externalid":        exact("g.external_id"),
		"meta.created":      {expr: "g.when_created", kind: kindTime},
		"meta.lastmodified": {expr: "g.updated_at", kind: kindTime},
	},
}

// lookup resolves a path to a single-valued column of r: a core attribute
// (with or without the core URN), an enterprise attribute (with its URN),
// or a multi-valued attribute of one value row named without a filter
// (emails, emails.value). ok is false for an attribute r does not know.
func (r *resource) lookup(p Path) (column, bool) {
	urn := strings.ToLower(p.URN)
	name := strings.ToLower(p.Attr)
	if p.Sub != "" {
		name += "." + strings.ToLower(p.Sub)
	}
	switch {
	case urn == strings.ToLower(EnterpriseSchema) && r.extension != nil:
		c, ok := r.extension[name]
		return c, ok
	case urn != "" && urn != strings.ToLower(r.schema):
		return column{}, false
	}
	if c, ok := r.single[name]; ok {
		return c, true
	}
	return column{}, false
}

// rows returns the value rows of a multi-valued attribute of r.
func (r *resource) rows(p Path) ([]valueRow, bool) {
	urn := strings.ToLower(p.URN)
	if urn != "" && urn != strings.ToLower(r.schema) {
		return nil, false
	}
	rows, ok := r.multi[strings.ToLower(p.Attr)]
	return rows, ok
}
