package identity

import (
	"errors"
	"iam/models"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Length limits of user fields, in characters.
const (
	MaxUserFieldLen       = 256  // every text field not named below
	MaxUserDescriptionLen = 1024 // description
	MaxUserPhoneLen       = 64   // mobileNumber, homePhone, telephoneNumber, fax
	MaxEmailLen           = 254
)

// Genders are the accepted values of User.Gender besides empty (spec 2.1).
const Genders = "MFN"

var (
	countryCodes  = codeSet(iso3166Alpha2)
	languageCodes = codeSet(iso639Part1)
)

func codeSet(list string) map[string]bool {
	set := map[string]bool{}
	for _, c := range strings.Fields(list) {
		set[c] = true
	}
	return set
}

// checkUser checks the fields of a user that need no database, normalizing
// the case of country and language codes and filling an empty display name
// from the first and last names. It returns an EINVALID error naming the
// first broken field (by its API name) with every broken field in Causes.
func checkUser(u *User) error {
	var causes []models.Cause
	bad := func(field, detail string) { causes = append(causes, models.Cause{Title: field, Detail: detail}) }

	if emailErr := (*models.Error)(nil); errors.As(checkEmail(u.Email), &emailErr) {
		bad("email", emailErr.Detail)
	} else if len(u.Email) > MaxEmailLen {
		bad("email", "must be at most 254 characters")
	}
	for _, f := range userTexts(u) {
		if n := utf8.RuneCountInString(f.value); n > f.max {
			bad(f.name, "must be at most "+strconv.Itoa(f.max)+" characters")
		} else if !utf8.ValidString(f.value) || strings.ContainsRune(f.value, 0) {
			bad(f.name, "must be valid text")
		}
	}
	if n := utf8.RuneCountInString(u.UserName); n > MaxUserFieldLen {
		bad("userName", "must be at most "+strconv.Itoa(MaxUserFieldLen)+" characters")
	} else if u.UserName != strings.TrimSpace(u.UserName) || !utf8.ValidString(u.UserName) || strings.ContainsRune(u.UserName, 0) {
		bad("userName", "must be valid text without leading or trailing spaces")
	}
	if n := utf8.RuneCountInString(u.ExternalID); n > MaxUserFieldLen {
		bad("externalId", "must be at most "+strconv.Itoa(MaxUserFieldLen)+" characters")
	} else if !utf8.ValidString(u.ExternalID) || strings.ContainsRune(u.ExternalID, 0) {
		bad("externalId", "must be valid text")
	}
	if u.EmployeeID != strings.TrimSpace(u.EmployeeID) {
		bad("employeeID", "must not start or end with spaces")
	}
	if u.Gender != "" && (len(u.Gender) != 1 || !strings.Contains(Genders, u.Gender)) {
		bad("gender", "must be M, F or N")
	}
	if u.Country != "" {
		u.Country = strings.ToUpper(u.Country)
		if !countryCodes[u.Country] {
			bad("country", "must be an ISO 3166-1 alpha-2 country code, such as DE")
		}
	}
	if u.Language != "" {
		lang, ok := normalizeLanguage(u.Language)
		if !ok {
			bad("language", "must be an ISO 639-1 code, or one combined with an ISO 3166-1 country code (en or en-US)")
		}
		u.Language = lang
	}
	if u.Container != "" {
		if reason, ok := CheckContainer(u.Container); !ok {
			bad("container", "must be a distinguished name in RFC 4514 syntax (OU=Sales,DC=example,DC=com): it "+reason)
		}
	}
	if u.Status != UserActive && u.Status != UserInactive {
		bad("status", "must be 1 (active) or 0 (inactive)")
	}
	if u.Role != RoleAdmin && u.Role != RoleUser {
		bad("role", "must be admin or user")
	}
	if len(causes) == 0 {
		if u.DisplayName == "" {
			u.DisplayName = strings.TrimSpace(u.FirstName + " " + u.LastName)
		}
		return nil
	}
	return &models.Error{Code: models.EINVALID, Field: causes[0].Title, Detail: causes[0].Detail, Causes: causes}
}

// userText is a text field of a user checked for length and valid text:
// its API name, its value and the most characters it may hold.
type userText struct {
	name  string
	value string
	max   int
}

// normalizeLanguage accepts xx or xx-YY (any case; an underscore for the
// dash too) and returns it as lower-case language, upper-case country.
func normalizeLanguage(s string) (string, bool) {
	lang, country, hasCountry := strings.Cut(strings.ReplaceAll(s, "_", "-"), "-")
	lang = strings.ToLower(lang)
	if !languageCodes[lang] {
		return s, false
	}
	if !hasCountry {
		return lang, true
	}
	country = strings.ToUpper(country)
	if !countryCodes[country] {
		return s, false
	}
	return lang + "-" + country, true
}
