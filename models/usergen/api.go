package usergen

import (
	"fmt"
	"strings"
)

// API writes package api's part: the view of a user, the JSON writer that
// writes the same bytes as encoding/json writes the view, and the writable
// fields of a request with the function that copies them onto a user.
func API(fields []Field, source string) ([]byte, error) {
	var b strings.Builder
	b.WriteString(header("api", source))
	b.WriteString("import (\n\"strconv\"\n\n\"iam/models\"\n\"iam/models/identity\"\n)\n\n")
	writeView(&b, fields)
	writeAppend(&b, fields)
	writeRequest(&b, fields)
	return gofmt(&b)
}

func shown(fields []Field) []Field {
	var out []Field
	for _, f := range fields {
		if f.JSON != "" {
			out = append(out, f)
		}
	}
	return out
}

// writeView writes userView and newUserView.
func writeView(b *strings.Builder, fields []Field) {
	b.WriteString("// userView is a user as the API shows it (spec 2.1, camelCase): the\n" +
		"// fields of identity.User with an API name. The password is never shown.\n" +
		"type userView struct {\n")
	for _, f := range shown(fields) {
		typ := apiTypes[f.Type]
		if f.Custom {
			typ = "*" + f.JSON + "View"
		}
		fmt.Fprintf(b, "%s %s `json:%q`\n", f.Name, typ, f.JSON)
	}
	b.WriteString("}\n\n")

	b.WriteString("// newUserView is the view of u.\nfunc newUserView(u *identity.User) userView {\nv := userView{")
	var later []string
	n := 0
	for _, f := range shown(fields) {
		var value string
		switch {
		case f.Custom:
			value = "new" + f.Name + "View(u)"
		case f.Type == "int64":
			value = "models.FormatID(u." + f.Name + ")"
		case f.Type == "*int64":
			later = append(later, fmt.Sprintf("if u.%[1]s != nil {\nid := models.FormatID(*u.%[1]s)\nv.%[1]s = &id\n}", f.Name))
			continue
		default:
			value = "u." + f.Name
		}
		if n%4 == 0 {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
		n++
		fmt.Fprintf(b, "%s: %s,", f.Name, value)
	}
	b.WriteString("\n}\n")
	for _, s := range later {
		b.WriteString(s + "\n")
	}
	b.WriteString("return v\n}\n\n")
}

// writeAppend writes appendUserJSON.
func writeAppend(b *strings.Builder, fields []Field) {
	b.WriteString("// appendUserJSON appends the user as encoding/json writes its view\n" +
		"// (newUserView), without making the view.\n" +
		"func appendUserJSON(b []byte, u *identity.User) []byte {\n")
	sep := "{"
	for _, f := range shown(fields) {
		key := "`" + sep + `"` + f.JSON + `":` + "`"
		sep = ","
		switch {
		case f.Custom:
			fmt.Fprintf(b, "b = append%sJSON(append(b, %s...), u)\n", f.Name, key)
		case f.Type == "string":
			fmt.Fprintf(b, "b = appendJSONString(append(b, %s...), u.%s)\n", key, f.Name)
		case f.Type == "bool":
			fmt.Fprintf(b, "b = strconv.AppendBool(append(b, %s...), u.%s)\n", key, f.Name)
		case f.Type == "int":
			fmt.Fprintf(b, "b = strconv.AppendInt(append(b, %s...), int64(u.%s), 10)\n", key, f.Name)
		case f.Type == "int64":
			fmt.Fprintf(b, "b = appendJSONID(append(b, %s...), u.%s)\n", key, f.Name)
		case f.Type == "*int64":
			null := "`" + strings.Trim(key, "`") + "null`"
			fmt.Fprintf(b, "if u.%[1]s == nil {\nb = append(b, %[3]s...)\n} else {\nb = appendJSONID(append(b, %[2]s...), *u.%[1]s)\n}\n", f.Name, key, null)
		}
	}
	if sep == "{" {
		b.WriteString("b = append(b, '{')\n")
	}
	b.WriteString("return append(b, '}')\n}\n\n")
}

// writeRequest writes userFields and its apply.
func writeRequest(b *strings.Builder, fields []Field) {
	b.WriteString("// userFields are the writable fields of a user (tagged write), as POST\n" +
		"// /users and PATCH /users/{id} take them. An absent field is nil; PATCH\n" +
		"// changes only the fields present.\n" +
		"type userFields struct {\n")
	var apply []string
	for _, f := range fields {
		if !f.Write {
			continue
		}
		switch f.Type {
		case "*int64":
			fmt.Fprintf(b, "%s optionalRef `json:%q`\n", f.Name, f.JSON)
			apply = append(apply, fmt.Sprintf(`if f.%[1]s.Set {
u.%[1]s = nil
if f.%[1]s.Value != "" {
id, err := models.ParseID(%[2]q, f.%[1]s.Value)
if err != nil {
return models.Invalid(%[2]q, "must be a user id (a digit string) or null")
}
u.%[1]s = &id
}
}`, f.Name, f.JSON))
		default:
			fmt.Fprintf(b, "%s *%s `json:%q`\n", f.Name, f.Type, f.JSON)
			apply = append(apply, fmt.Sprintf("if f.%[1]s != nil {\nu.%[1]s = *f.%[1]s\n}", f.Name))
		}
	}
	b.WriteString("}\n\n")
	b.WriteString("// apply copies the fields present onto u.\n" +
		"func (f *userFields) apply(u *identity.User) error {\n")
	for _, s := range apply {
		b.WriteString(s + "\n")
	}
	b.WriteString("return nil\n}\n")
}
