package usergen

import (
	"fmt"
	"go/token"
	"strconv"
	"strings"
)

// Models writes package models' part: the list columns, the columns lists
// leave out, the attributes of the listing allow-list, the list scanner and
// the text fields checkUser checks.
func Models(fields []Field, source string) ([]byte, error) {
	var listed, unlisted []string
	needSQL, needJSON, needTime := false, false, false
	for _, f := range fields {
		if !f.List {
			unlisted = append(unlisted, f.Column)
			continue
		}
		listed = append(listed, f.Column)
		switch t := scanTypes[f.Type].temp; {
		case f.JSONDB:
			needSQL, needJSON = true, true
		case strings.HasPrefix(t, "sql."):
			needSQL = true
			needTime = needTime || f.Type == "*time.Time"
		}
	}
	var b strings.Builder
	b.WriteString(header("identity", source))
	b.WriteString("import (\n\"context\"\n")
	if needSQL {
		b.WriteString("\"database/sql\"\n")
	}
	if needJSON {
		b.WriteString("\"encoding/json\"\n\"fmt\"\n")
	}
	if needTime {
		b.WriteString("\"time\"\n")
	}
	b.WriteString("\n\"github.com/uptrace/bun\"\n\n\"iam/models/listing\"\n)\n\n")

	b.WriteString("// UserListColumns are the columns a list of users reads, in the order\n" +
		"// scanUserRows scans them: every column of User not tagged nolist.\n")
	b.WriteString("var UserListColumns = []string{")
	quoteList(&b, listed)
	b.WriteString("}\n\n")
	b.WriteString("// SignInColumns are the columns of User tagged nolist: the sign-in state\n" +
		"// and role, which lists leave out. Users read from a list have them zero.\n")
	b.WriteString("var SignInColumns = []string{")
	quoteList(&b, unlisted)
	b.WriteString("}\n\n")

	b.WriteString("// UserAttributes are the attributes of UserListing: every field of User\n" +
		"// the API shows, filterable and sortable as its api tag says.\n")
	b.WriteString("var UserAttributes = []listing.Attribute{\n")
	for _, f := range fields {
		if f.JSON == "" {
			continue
		}
		if !f.Filter && !f.Sort {
			fmt.Fprintf(&b, "{Name: %q},\n", f.JSON)
			continue
		}
		fmt.Fprintf(&b, "{Name: %q, Column: %q, Type: %s", f.JSON, f.Column, listingTypes[f.Type])
		if f.Filter {
			b.WriteString(", Filter: true")
		}
		if f.Sort {
			b.WriteString(", Sort: true")
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n\n")

	writeScanner(&b, fields)
	writeTexts(&b, fields)
	return gofmt(&b)
}

// writeScanner writes scanUserRows.
func writeScanner(b *strings.Builder, fields []Field) {
	b.WriteString(`// scanUserRows runs a page query of selectUserList and appends its rows to
// dest, scanning UserListColumns in order straight into the fields. bun's
// scan, which looks up the field of every column of every row and sets it
// through reflection, cost as much CPU time as the driver's reading of the
// rows, a sixth of what a page of GET /users cost under load. The values
// are those bun's scan gives on both databases
// (TestUserStore_ListScansLikeBun): NULL in a nullable column is a nil
// pointer, NULL JSON a nil pointer (the JSON decoded otherwise), times as
// the driver reads them.
func scanUserRows(ctx context.Context, q *bun.SelectQuery, dest *[]User) error {
	rows, err := q.Rows(ctx)
	if err != nil {
		return err
	}
	defer rows.Close()
`)
	var temps, args, sets []string
	for _, f := range fields {
		if !f.List {
			continue
		}
		v := lowerFirst(f.Name)
		if token.IsKeyword(v) {
			v += "_"
		}
		switch t := scanTypes[f.Type]; {
		case f.JSONDB:
			temps = append(temps, v+" sql.RawBytes")
			args = append(args, "&"+v)
			sets = append(sets, fmt.Sprintf("if %[2]s != nil {\n"+
				"if err := json.Unmarshal(%[2]s, &u.%[1]s); err != nil {\n"+
				"*dest = users\n"+
				"return fmt.Errorf(\"user %%d: %[3]s: %%w\", u.ID, err)\n}\n}", f.Name, v, f.Column))
		case t.temp != "":
			temps = append(temps, v+" "+t.temp)
			args = append(args, "&"+v)
			sets = append(sets, fmt.Sprintf(t.set, f.Name, v))
		default:
			args = append(args, "&u."+f.Name)
		}
	}
	if len(temps) > 0 {
		b.WriteString("var (\n" + strings.Join(temps, "\n") + "\n)\n")
	}
	b.WriteString(`users := *dest
	for rows.Next() {
		users = append(users, User{})
		u := &users[len(users)-1]
		if err := rows.Scan(`)
	for i, a := range args {
		if i > 0 {
			b.WriteString(",")
			if i%6 == 0 {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		b.WriteString(a)
	}
	b.WriteString("); err != nil {\n*dest = users\nreturn err\n}\n")
	for _, s := range sets {
		b.WriteString(s + "\n")
	}
	b.WriteString("}\n*dest = users\nreturn rows.Err()\n}\n\n")
}

// writeTexts writes userTexts.
func writeTexts(b *strings.Builder, fields []Field) {
	var texts []string
	for _, f := range fields {
		if f.Max != "" {
			texts = append(texts, fmt.Sprintf("{%q, u.%s, %s},", f.JSON, f.Name, f.Max))
		}
	}
	n := strconv.Itoa(len(texts))
	b.WriteString("// userTexts are the text fields of u that checkUser checks (tagged max):\n" +
		"// API name, value and the most characters it may hold.\n")
	b.WriteString("func userTexts(u *User) [" + n + "]userText {\nreturn [" + n + "]userText{\n")
	b.WriteString(strings.Join(texts, "\n"))
	b.WriteString("\n}\n}\n")
}
