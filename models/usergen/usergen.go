// Package usergen writes the code that follows the user record from the
// one place it is declared: the fields of models.User and their tags. The
// list columns, the list scanner, the listing allow-list and the length
// checks in package models; the view, the JSON writer and the request
// fields in package api. cmd/usergen runs it (go generate); the tests of
// both packages run it again in memory and fail when the committed files
// differ (TestUserCodeGenerated).
//
// Each field of User carries an api tag besides its bun tag:
//
//	api:"-"           read by lists, not shown (OrgID, CreatedAt)
//	api:"-,nolist"    not read by lists: users read from a list have it zero
//	api:"name,opts"   shown in the API as name, read by lists
//
// The options after a name:
//
//	write      a field of POST /users and PATCH /users/{id}
//	filter     allowed in GET /users' filter (and in dynamic group rules)
//	sort       allowed in sort (NOT NULL columns only)
//	max=Const  checked as text of at most Const characters (checkUser)
//	custom     shown by hand-written code in package api: a type
//	           <name>View, func new<Field>View(*models.User) *<name>View and
//	           func append<Field>JSON([]byte, *models.User) []byte
//
// The Go type decides the rest: string, bool and int are shown as such,
// int64 is an id (a digit string), *int64 an id or null (written as an id
// string or null, scanned from a nullable column). A bun type:json column
// is decoded with encoding/json when not NULL.
//
// A new user attribute takes: the field in models.User with its bun and
// api tags; a migration adding its column (one templated file serves both
// databases; a NOT NULL DEFAULT column for a sortable one); go generate
// ./models ./api; the OpenAPI document's user schemas (UserProfile when
// writable, the shared properties of UserItem and User, and User's
// required list: TestUserSchemas_FollowUser fails until they follow) and,
// when sortable, the list of sortable attributes in GET /users'
// description. A rule beyond length (a format) goes in checkUser.
package usergen

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Field is one field of the struct with what its tags say.
type Field struct {
	Name   string // Go name
	Type   string // Go type as written: string, *int64, time.Time ...
	Column string // bun column
	JSONDB bool   // bun type:json
	JSON   string // API name; empty when not shown
	List   bool   // read by lists
	Write  bool
	Filter bool
	Sort   bool
	Custom bool
	Max    string // the length limit constant; empty when not checked
}

// Parse reads the fields of the struct typeName from the Go source src.
func Parse(src []byte, typeName string) ([]Field, error) {
	file, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var st *ast.StructType
	ast.Inspect(file, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == typeName {
			st, _ = ts.Type.(*ast.StructType)
			return false
		}
		return st == nil
	})
	if st == nil {
		return nil, fmt.Errorf("no struct type %s", typeName)
	}
	var fields []Field
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 { // bun.BaseModel
			continue
		}
		if len(f.Names) > 1 {
			return nil, fmt.Errorf("%s: one field a line, each with its tags", f.Names[0].Name)
		}
		field, err := parseField(f)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", typeName, f.Names[0].Name, err)
		}
		fields = append(fields, field)
	}
	return fields, nil
}

func parseField(f *ast.Field) (Field, error) {
	var typ bytes.Buffer
	if err := format.Node(&typ, token.NewFileSet(), f.Type); err != nil {
		return Field{}, err
	}
	field := Field{Name: f.Names[0].Name, Type: typ.String()}
	if f.Tag == nil {
		return field, errors.New("no tags")
	}
	raw, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return field, err
	}
	tag := reflect.StructTag(raw)
	bunTag, ok := tag.Lookup("bun")
	if !ok {
		return field, errors.New("no bun tag")
	}
	bunParts := strings.Split(bunTag, ",")
	field.Column = bunParts[0]
	field.JSONDB = strings.Contains(bunTag, "type:json")
	if field.Column == "" {
		return field, errors.New("the bun tag names no column")
	}
	apiTag, ok := tag.Lookup("api")
	if !ok {
		return field, errors.New(`no api tag: say how the API treats the field (see package usergen: api:"-", api:"-,nolist" or api:"name,options")`)
	}
	parts := strings.Split(apiTag, ",")
	field.List = true
	if parts[0] != "-" {
		field.JSON = parts[0]
		if field.JSON == "" {
			return field, errors.New(`the api tag names no API name (api:"-" for a field not shown)`)
		}
	}
	for _, opt := range parts[1:] {
		switch key, value, _ := strings.Cut(opt, "="); key {
		case "nolist":
			field.List = false
		case "write":
			field.Write = true
		case "filter":
			field.Filter = true
		case "sort":
			field.Sort = true
		case "custom":
			field.Custom = true
		case "max":
			if value == "" {
				return field, errors.New("max needs a constant: max=MaxUserFieldLen")
			}
			field.Max = value
		default:
			return field, fmt.Errorf("unknown api tag option %q", opt)
		}
	}
	shown := field.JSON != ""
	switch {
	case !shown && (field.Write || field.Filter || field.Sort || field.Custom || field.Max != ""):
		return field, errors.New("write, filter, sort, max and custom need an API name")
	case shown && !validName(field.JSON):
		return field, fmt.Errorf("API name %q is not letters and digits", field.JSON)
	case shown && !field.List:
		return field, errors.New("a field shown in the API must be read by lists (no nolist)")
	case field.Max != "" && field.Type != "string":
		return field, errors.New("max is for string fields")
	case field.Custom && (field.Write || field.Filter || field.Sort):
		return field, errors.New("a custom field is only shown")
	}
	if shown && !field.Custom {
		if _, ok := apiTypes[field.Type]; !ok {
			return field, fmt.Errorf("the API cannot show a %s (cmd/usergen knows %s; or tag it custom)", field.Type, known(apiTypes))
		}
	}
	if field.Write && !writeTypes[field.Type] {
		return field, fmt.Errorf("a %s is not writable (cmd/usergen writes %s)", field.Type, known(writeTypes))
	}
	if (field.Filter || field.Sort) && listingTypes[field.Type] == "" {
		return field, fmt.Errorf("a %s cannot be filtered or sorted on", field.Type)
	}
	if field.List && !field.JSONDB {
		if _, ok := scanTypes[field.Type]; !ok {
			return field, fmt.Errorf("the list scanner cannot read a %s (it knows %s; or tag it nolist)", field.Type, known(scanTypes))
		}
	}
	if field.JSONDB && !strings.HasPrefix(field.Type, "*") {
		return field, errors.New("a type:json column is read into a pointer (nil for NULL)")
	}
	return field, nil
}

// scanTypes are the types the list scanner reads: the variable a column is
// scanned into when not the field itself, and how the field is set from it.
var scanTypes = map[string]struct{ temp, set string }{
	"string":     {},
	"bool":       {},
	"int64":      {},
	"time.Time":  {},
	"int":        {"int64", "u.%s = int(%s)"},
	"*int64":     {"sql.NullInt64", "if %[2]s.Valid {\nu.%[1]s = new(int64)\n*u.%[1]s = %[2]s.Int64\n}"},
	"*string":    {"sql.NullString", "if %[2]s.Valid {\nu.%[1]s = new(string)\n*u.%[1]s = %[2]s.String\n}"},
	"*time.Time": {"sql.NullTime", "if %[2]s.Valid {\nu.%[1]s = new(time.Time)\n*u.%[1]s = %[2]s.Time\n}"},
}

// apiTypes are the types the API shows: the view's type of the field.
var apiTypes = map[string]string{
	"string": "string", "bool": "bool", "int": "int", "int64": "string", "*int64": "*string",
}

// writeTypes are the types of writable fields.
var writeTypes = map[string]bool{"string": true, "bool": true, "int": true, "*int64": true}

// listingTypes are the listing types of filterable and sortable fields.
var listingTypes = map[string]string{
	"string": "listing.TypeString", "bool": "listing.TypeBoolean", "int": "listing.TypeInteger",
	"int64": "listing.TypeID", "*int64": "listing.TypeID", "time.Time": "listing.TypeTime",
}

func known[V any](m map[string]V) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// header starts every generated file.
func header(pkg, source string) string {
	return "// Code generated by cmd/usergen from " + source + "; DO NOT EDIT.\n\npackage " + pkg + "\n\n"
}

// gofmt formats a generated file, or says what the generator got wrong.
func gofmt(b *strings.Builder) ([]byte, error) {
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("generated code does not parse: %w\n%s", err, b.String())
	}
	return out, nil
}

// quoteList writes a Go string slice literal's elements, lines of about
// 100 characters.
func quoteList(b *strings.Builder, items []string) {
	width := 0
	for _, s := range items {
		q := strconv.Quote(s) + ","
		if width == 0 || width+1+len(q) > 100 {
			b.WriteString("\n\t")
			width = 8
		} else {
			b.WriteString(" ")
			width++
		}
		b.WriteString(q)
		width += len(q)
	}
	b.WriteString("\n")
}

// validName tells whether an API name is written in JSON as it is.
func validName(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return s != ""
}

// lowerFirst is name with a lower-case first letter (a local variable's).
func lowerFirst(name string) string {
	return strings.ToLower(name[:1]) + name[1:]
}

// Source is the file that declares models.User, as the generated files
// name it.
const Source = "models/identity/users.go"

// Generate reads User from the file src and writes the part (models or api).
func Generate(part, src string) ([]byte, error) {
	text, err := os.ReadFile(src) //nolint:gosec // G304: the repository's source file that the generator or its test names
	if err != nil {
		return nil, err
	}
	fields, err := Parse(text, "User")
	if err != nil {
		return nil, err
	}
	switch part {
	case "models":
		return Models(fields, Source)
	case "api":
		return API(fields, Source)
	}
	return nil, fmt.Errorf("part %q: models or api", part)
}

// Check compares the committed file generated with what Generate writes
// now, and says how they differ: the first line that does.
func Check(part, src, generated string) error {
	want, err := Generate(part, src)
	if err != nil {
		return err
	}
	got, err := os.ReadFile(generated) //nolint:gosec // G304: the repository's generated file that the test names
	if err != nil {
		return err
	}
	if bytes.Equal(got, want) {
		return nil
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			return fmt.Errorf("%s is not what cmd/usergen writes from %s (run go generate): line %d is\n\t%s\nwant\n\t%s", generated, src, i+1, g, w)
		}
	}
	return fmt.Errorf("%s differs from what cmd/usergen writes from %s (run go generate)", generated, src)
}
