package api

import (
	"archive/zip"
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"iam/models/enrollment"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/management"
	"iam/models/protection"
)

// The user schemas' country and language patterns list the codes the
// service accepts (models.CountryCodes, models.LanguageCodes).
func TestOpenAPI_UserCodePatterns(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	countries := strings.Join(identity.CountryCodes(), "|")
	want := map[string]string{
		"country":  "^(" + countries + ")?$",
		"language": "^((" + strings.Join(identity.LanguageCodes(), "|") + ")(-(" + countries + "))?)?$",
	}
	for _, schema := range []string{"UserCreate", "UserPatch"} {
		props := doc.Components.Schemas[schema].Value.Properties
		for field, pattern := range want {
			if got := props[field].Value.Pattern; got != pattern {
				t.Errorf("%s.%s pattern %q, want %q", schema, field, got, pattern)
			}
		}
	}
}

// A dynamic group's membership_rule is a filter of GET /users: the group
// bodies give it the same pattern (empty for a static group on create).
func TestOpenAPI_MembershipRulePattern(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GroupCreate": "^$|" + identity.UserListing.FilterPattern(), "GroupPatch": identity.UserListing.FilterPattern()}
	for schema, pattern := range want {
		if got := doc.Components.Schemas[schema].Value.Properties["membership_rule"].Value.Pattern; got != pattern {
			t.Errorf("%s.membership_rule pattern\n got %q\nwant %q", schema, got, pattern)
		}
	}
}

// The closed sets the document enumerates are the service's: view columns,
// country codes of geolocation configs, time zones of business hours, the
// event types an event hook may name.
func TestOpenAPI_ClosedSetsAreTheService(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	enum := func(s *openapi3.Schema) []string {
		var out []string
		for _, v := range s.Enum {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	put := doc.Paths.Find("/api/v1/management/actions/{action_id}/view-columns").Put
	cols := put.RequestBody.Value.Content["application/json"].Schema.Value.Items.Value
	if got, want := enum(cols), management.ViewColumnNames(); !slices.Equal(got, want) {
		t.Errorf("view columns %v, want %v", got, want)
	}
	countries := enum(doc.Components.Schemas["CountryCode"].Value)
	for _, c := range countries {
		if !protection.IsCountryCode(c) {
			t.Errorf("country code %s is not one a geolocation config takes", c)
		}
	}
	for _, c := range identity.CountryCodes() {
		if protection.IsCountryCode(c) && !slices.Contains(countries, c) {
			t.Errorf("country code %s is missing", c)
		}
	}
	if got, want := enum(doc.Components.Schemas["EventHookEventType"].Value), hooks.Patterns(); !slices.Equal(got, want) {
		t.Errorf("event hook event types %v, want %v", got, want)
	}
	for _, z := range enum(doc.Components.Schemas["TimeZone"].Value) {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("time zone %s: %v", z, err)
		}
	}
}

// What the IPAddress pattern matches is an address the service reads, and
// addresses the service writes match it.
func TestOpenAPI_IPAddressPattern(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(doc.Components.Schemas["IPAddress"].Value.Pattern)
	for _, a := range []string{"0.0.0.0", "10.1.2.3", "255.255.255.255", "::", "::1", "2001:db8::1", "fe80::", "1:2:3:4:5:6:7:8", "1::8"} {
		if !re.MatchString(a) {
			t.Errorf("%s does not match", a)
		}
	}
	for _, a := range []string{"", "1.2.3", "01.2.3.4", "256.1.1.1", "1.2.3.4.5", "1:2:3:4:5:6:7:8:9", "::1::", "fe80::1%eth0", "g::1", " 1.2.3.4"} {
		if re.MatchString(a) {
			t.Errorf("%q matches", a)
		} else if _, err := netip.ParseAddr(a); err == nil && !strings.Contains(a, "%") {
			t.Errorf("%q does not match but is an address", a)
		}
	}
}

// The examples of file parts are files the service takes: the CA
// certificate a CA of today, the smart-card ZIP an archive of one
// certificate.
func TestOpenAPI_FileExamples(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	info, err := enrollment.ParseCertificate([]byte(fmt.Sprint(doc.Components.Schemas["CAConfigForm"].Value.Properties["ca_file"].Value.Example)))
	if err != nil {
		t.Fatal(err)
	}
	ca := info.Cert
	if now := time.Now(); !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || now.Before(ca.NotBefore) || now.After(ca.NotAfter) {
		t.Errorf("the CA example is not a CA valid now: %+v", ca.Subject)
	}
	form := doc.Paths.Find("/api/v1/protection/quick-enrollment/upload-smartcards").Post.RequestBody.Value.Content["multipart/form-data"].Schema.Value
	raw := []byte(fmt.Sprint(form.Properties["file"].Value.Example))
	z, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil || len(z.File) != 1 {
		t.Fatalf("the smart-card example is not a ZIP of one file: %v", err)
	}
	f, err := z.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read: a failed close loses nothing
	data, _ := io.ReadAll(f)
	if _, err := enrollment.ParseCertificate(data); err != nil {
		t.Errorf("%s: %v", z.File[0].Name, err)
	}
}
