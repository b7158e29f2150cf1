package scim

import (
	"errors"
	"testing"
)

func TestParseFilter_Accepts(t *testing.T) {
	for _, f := range []string{
		`userName eq "bjensen"`,
		`userName Eq "bjensen"`,
		`name.familyName co "O'Malley"`,
		`title pr and userType eq "Employee"`,
		`title pr or userType eq "Intern"`,
		`userType eq "Employee" and (emails co "example.com" or emails.value co "example.org")`,
		`userType ne "Employee" and not (emails co "example.com" or emails.value co "example.org")`,
		`emails[type eq "work" and value co "@example.com"] or ims[type eq "xmpp" and value co "@foo.com"]`,
		`meta.lastModified gt "2011-05-13T04:42:34Z"`,
		`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber eq "701984"`,
		`urn:ietf:params:scim:schemas:core:2.0:User:userName sw "J"`,
		`active eq true and x ge 10.5e2 and y eq null`,
	} {
		if _, err := ParseFilter(f); err != nil {
			t.Errorf("ParseFilter(%q): %v", f, err)
		}
	}
}

func TestParseFilter_Refuses(t *testing.T) {
	for _, f := range []string{``, `userName`, `userName eq`, `userName xx "a"`, `(userName eq "a"`, `not userName eq "a"`,
		`emails[type eq "work"`, `userName eq "a" and`, `"a" eq userName`, `userName eq 'a'`, `a.b.c eq "x"`} {
		_, err := ParseFilter(f)
		var fe *FilterError
		if !errors.As(err, &fe) {
			t.Errorf("ParseFilter(%q) = %v, want a FilterError", f, err)
		}
	}
}

func TestParsePatchPath(t *testing.T) {
	p, vp, err := ParsePatchPath(`emails[type eq "work" and primary eq true].value`)
	if err != nil || vp == nil || p.Attr != "emails" || vp.Sub != "value" {
		t.Fatalf("got %+v %+v %v", p, vp, err)
	}
	p, vp, err = ParsePatchPath(`members[value eq "2819c223"]`)
	if err != nil || vp == nil || p.Attr != "members" || vp.Sub != "" {
		t.Fatalf("got %+v %+v %v", p, vp, err)
	}
	p, vp, err = ParsePatchPath(`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value`)
	if err != nil || vp != nil || p.URN != EnterpriseSchema || p.Attr != "manager" || p.Sub != "value" {
		t.Fatalf("got %+v %+v %v", p, vp, err)
	}
}

func TestWhere_BindsValues(t *testing.T) {
	// A PATCH path's sub-attribute after ] is no filter.
	if _, err := ParseFilter(`phoneNumbers[type eq "mobile"].value pr`); err == nil {
		t.Fatal("accepted a sub-attribute after ] followed by an operator")
	}
	e, err := ParseFilter(`userName eq "x' OR 1=1 --" and emails[type eq "work" and primary eq true] and not (phoneNumbers.value pr)`)
	if err != nil {
		t.Fatal(err)
	}
	c, err := userResource.where(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.args) != 1 || c.args[0] != "x' OR 1=1 --" {
		t.Fatalf("args %v", c.args)
	}
	for _, bad := range []string{`nope eq "x"`, `active gt true`, `meta.lastModified gt "yesterday"`, `emails[nope[x eq "y"]]`} {
		e, err := ParseFilter(bad)
		if err != nil {
			continue
		}
		if _, err := userResource.where(e); err == nil {
			t.Errorf("where(%q) accepted", bad)
		}
	}
}

// FuzzParseFilter: any text parses or fails with a FilterError, never
// panics, and what parses translates to SQL or fails with a FilterError.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{`userName eq "bjensen"`, `emails[type eq "work" and primary eq true]`, `not (a pr) or (b lt 3)`,
		`members[value eq "1"]`, `urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value eq "5"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseFilter(s)
		var fe *FilterError
		if err != nil {
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		for _, r := range []*resource{userResource, groupResource} {
			if _, err := r.where(e); err != nil && !errors.As(err, &fe) {
				t.Fatalf("where: %T %v", err, err)
			}
		}
		_, _, _ = ParsePatchPath(s)
	})
}
