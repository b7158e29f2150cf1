package csvimport

import (
	"fmt"
	"strings"
)

// Titles of the causes of a refused upload (error 00000114 CSV_UPLOAD_FAILED).
const (
	CauseDuplicateColumns = "DUPLICATE_COLUMNS"
	CauseMissingColumns   = "MISSING_COLUMNS"
	CauseUnknownColumns   = "UNKNOWN_COLUMNS"
	CauseAmbiguousUser    = "AMBIGUOUS_USER_COLUMN"
	CauseInvalidEncoding  = "INVALID_ENCODING"
	CauseEmptyFile        = "EMPTY_FILE"
	CauseMalformedHeader  = "MALFORMED_HEADER"
)

// Problem is one reason an upload is refused.
type Problem struct {
	Title  string
	Detail string
}

// Columns tells where each needed column is in the rows of a file.
type Columns struct {
	// UserColumn is the column that identifies the user.
	UserColumn string
	// Index maps each needed column's canonical name to its field index.
	Index map[string]int
}

// Need is a column the chosen import option requires, and why.
type Need struct {
	Column string
	For    string // what needs it, for the message
}

// CheckHeader matches a header against the columns an import needs: exactly
// one of userColumns, and every column of needs. Names are compared
// without regard to case or surrounding spaces. Every problem is reported:
// duplicated, unknown and missing columns, none or several user columns.
func CheckHeader(header []string, userColumns []string, needs []Need) (Columns, []Problem) {
	known := map[string]string{} // folded name -> canonical
	for _, c := range userColumns {
		known[fold(c)] = c
	}
	for _, n := range needs {
		known[fold(n.Column)] = n.Column
	}
	cols := Columns{Index: map[string]int{}}
	firstAt := map[string]int{}
	var dups, unknown []string
	for i, h := range header {
		name := strings.TrimSpace(h)
		if name == "" {
			unknown = append(unknown, fmt.Sprintf("column %d has no name", i+1))
			continue
		}
		canon, ok := known[fold(name)]
		if !ok {
			unknown = append(unknown, fmt.Sprintf("%q (column %d)", name, i+1))
			continue
		}
		if first, seen := firstAt[canon]; seen {
			dups = append(dups, fmt.Sprintf("%q (columns %d and %d)", canon, first+1, i+1))
			continue
		}
		firstAt[canon] = i
		cols.Index[canon] = i
	}
	var problems []Problem
	if len(dups) > 0 {
		problems = append(problems, Problem{CauseDuplicateColumns, "each column may appear once: " + strings.Join(dups, ", ")})
	}
	if len(unknown) > 0 {
		problems = append(problems, Problem{CauseUnknownColumns, "columns that the chosen factor configs do not use: " + strings.Join(unknown, ", ")})
	}
	var users []string
	for _, c := range userColumns {
		if _, ok := cols.Index[c]; ok {
			users = append(users, c)
		}
	}
	var missing []string
	switch len(users) {
	case 0:
		missing = append(missing, fmt.Sprintf("one column that identifies the user (%s)", strings.Join(quoteAll(userColumns), " or ")))
	case 1:
		cols.UserColumn = users[0]
	default:
		problems = append(problems, Problem{CauseAmbiguousUser, fmt.Sprintf("use only one column to identify the user, not %s", strings.Join(quoteAll(users), " and "))})
	}
	seenNeed := map[string]bool{}
	for _, n := range needs {
		if _, ok := cols.Index[n.Column]; !ok && !seenNeed[n.Column] {
			missing = append(missing, fmt.Sprintf("%q (needed by %s)", n.Column, n.For))
		}
		seenNeed[n.Column] = true
	}
	if len(missing) > 0 {
		problems = append(problems, Problem{CauseMissingColumns, "the file lacks " + strings.Join(missing, ", ")})
	}
	return cols, problems
}

func fold(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
