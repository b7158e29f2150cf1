package management_test

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/listing"
	"iam/models/management"
	"iam/models/modeltest"
	"iam/models/store"
)

func TestParseMgmtAction(t *testing.T) {
	for in, want := range map[string]management.MgmtAction{"move-users": management.ActionMoveUsers, "move-user": management.ActionMoveUsers,
		"delete-users": management.ActionDeleteUsers, "delete-user": management.ActionDeleteUsers} {
		if got, ok := management.ParseMgmtAction(in); !ok || got != want {
			t.Errorf("ParseMgmtAction(%q) = %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "Move-Users", "disable-users", "move-users "} {
		if _, ok := management.ParseMgmtAction(in); ok {
			t.Errorf("ParseMgmtAction(%q) accepted", in)
		}
	}
}

func TestMgmtStore_ViewColumns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := store.NewStore(db)
		org, other := modeltest.NewOrg(t, store), modeltest.NewOrg(t, store)
		m := store.Management
		got, err := m.ViewColumns(ctx, org.ID, management.ActionMoveUsers)
		if err != nil || !slices.Equal(got, management.DefaultViewColumns(management.ActionMoveUsers)) {
			t.Fatalf("default = %v, %v", got, err)
		}
		want := []string{"email", "container", "department"}
		if _, err := m.SetViewColumns(ctx, org.ID, management.ActionMoveUsers, want); err != nil {
			t.Fatal(err)
		}
		if _, err := m.SetViewColumns(ctx, org.ID, management.ActionMoveUsers, []string{"email", "title"}); err != nil {
			t.Fatal(err) // replaced, not added to
		}
		got, _ = m.ViewColumns(ctx, org.ID, management.ActionMoveUsers)
		if !slices.Equal(got, []string{"email", "title"}) {
			t.Errorf("after set = %v", got)
		}
		// Per action and per organization.
		if got, _ := m.ViewColumns(ctx, org.ID, management.ActionDeleteUsers); !slices.Equal(got, management.DefaultViewColumns(management.ActionDeleteUsers)) {
			t.Errorf("delete-users columns = %v, want the default", got)
		}
		if got, _ := m.ViewColumns(ctx, other.ID, management.ActionMoveUsers); !slices.Equal(got, management.DefaultViewColumns(management.ActionMoveUsers)) {
			t.Errorf("other organization's columns = %v, want the default", got)
		}
		many := make([]string, management.MaxViewColumns+1)
		for i := range many {
			many[i] = "email"
		}
		for _, bad := range [][]string{nil, {"password"}, {"email", "email"}, {"primarySource"}, {"passwordHash"}, many} {
			if _, err := m.SetViewColumns(ctx, org.ID, management.ActionMoveUsers, bad); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("SetViewColumns(%v) = %v, want EINVALID", bad, err)
			}
		}
		if got, _ := m.ViewColumns(ctx, org.ID, management.ActionMoveUsers); !slices.Equal(got, []string{"email", "title"}) {
			t.Errorf("a refused set changed the columns: %v", got)
		}
	})
}

func TestUploadHeader(t *testing.T) {
	header, match, err := management.UploadHeader([]string{" primary email ", "Department", "EMPLOYEE ID"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(match, []string{"Primary Email", "Employee ID"}) || header[0] != (management.UploadColumn{Name: "Primary Email", IsMatchColumn: true}) ||
		header[1] != (management.UploadColumn{Name: "Department"}) {
		t.Errorf("header %+v, match %v", header, match)
	}
	for _, bad := range [][]string{{"Department"}, {"Primary Email", "primary email"}, {"Primary Email", ""}} {
		if _, _, err := management.UploadHeader(bad); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("UploadHeader(%q) = %v, want EINVALID", bad, err)
		}
	}
	var me *models.Error
	if _, _, err := management.UploadHeader([]string{"User ID", "user id"}); !errors.As(err, &me) || len(me.Causes) != 1 || me.Causes[0].Title != "DUPLICATE_COLUMNS" {
		t.Errorf("duplicate columns = %v", err)
	}
}

// mgmtFixture is an organization with five users: u[0..4], u[3] and u[4]
// sharing a mobile number.
type mgmtFixture struct {
	store *store.Store
	org   *identity.Organization
	users []*identity.User
}

func newMgmtFixture(t *testing.T, db *bun.DB) *mgmtFixture {
	store := store.NewStore(db)
	f := &mgmtFixture{store: store, org: modeltest.NewOrg(t, store)}
	for i := range 5 {
		u := identity.User{Email: fmt.Sprintf("User%d@Example.com", i), FirstName: fmt.Sprintf("F%d", i), LastName: "L",
			EmployeeID: fmt.Sprintf("E%d", i), Department: "Sales"}
		if i >= 3 {
			u.MobileNumber = "+49 555"
		}
		f.users = append(f.users, modeltest.AddUser(t, store.Users, f.org.ID, u))
	}
	return f
}

func records(rows [][]string) []management.UploadRecord {
	out := make([]management.UploadRecord, len(rows))
	for i, r := range rows {
		out[i] = management.UploadRecord{Fields: r}
	}
	return out
}

func (f *mgmtFixture) upload(t *testing.T, a management.MgmtAction, names []string, rows [][]string) *management.MgmtUpload {
	t.Helper()
	header, match, err := management.UploadHeader(names)
	if err != nil {
		t.Fatal(err)
	}
	up := &management.MgmtUpload{OrgID: f.org.ID, Action: a, FileName: "u.csv", Header: header, MatchColumns: match}
	if err := f.store.Management.CreateUpload(t.Context(), up, records(rows)); err != nil {
		t.Fatal(err)
	}
	return up
}

func TestMgmtStore_Upload(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		f := newMgmtFixture(t, db)
		m := f.store.Management
		u := f.users
		up := f.upload(t, management.ActionDeleteUsers, []string{"Primary Email", "Employee ID", "Mobile Number", "User ID", "Note"}, [][]string{
			{"user0@example.com", "", "", "", "a"},                      // 1 MAPPED (case ignored)
			{"", "E1", "", "", "b"},                                     // 2 MAPPED
			{"", "", "", models.FormatID(u[0].ID), "c"},                 // 3 DUPLICATE_USER of row 1
			{"nobody@example.com", "", "", "", "d"},                     // 4 NOT_FOUND
			{"", "", "+49 555", "", "e"},                                // 5 NOT_FOUND (shared)
			{"", "", "", "", "f"},                                       // 6 INVALID (no value)
			{"", "", "", "12ab", "g"},                                   // 7 INVALID (bad id)
			{"user2@example.com", "E1", "", "", "h"},                    // 8 INVALID (different users)
			{"user2@example.com", "E2", "", "", "i", "extra"},           // 9 INVALID (too many cells)
			{" user2@example.com ", "E2", "", models.FormatID(u[2].ID)}, // 10 MAPPED (short row, agreeing values)
		})
		if up.RowCount != 10 || !slices.Equal(up.MatchColumns, []string{"Primary Email", "Employee ID", "Mobile Number", "User ID"}) {
			t.Errorf("upload = %+v", up)
		}
		got, err := m.GetUpload(ctx, f.org.ID, management.ActionDeleteUsers, up.ID)
		if err != nil || got.RowCount != 10 || len(got.Header) != 5 || got.Header[4].IsMatchColumn || !got.Header[3].IsMatchColumn {
			t.Fatalf("GetUpload = %+v, %v", got, err)
		}
		rows := listUploadRows(t, m, f.org.ID, up.ID, "")
		want := []struct {
			status string
			user   *identity.User
			msg    string
		}{
			{management.RowMapped, u[0], ""}, {management.RowMapped, u[1], ""}, {management.RowDuplicateUser, u[0], "row 1"},
			{management.RowNotFound, nil, "nobody@example.com"}, {management.RowNotFound, nil, "matches 2 users"},
			{management.RowInvalid, nil, "no value in a match column"}, {management.RowInvalid, nil, "12ab"},
			{management.RowInvalid, nil, "different users"}, {management.RowInvalid, nil, "6 cells"}, {management.RowMapped, u[2], ""},
		}
		for i, w := range want {
			r := rows[i]
			if r.RowNo != int64(i+1) || r.Status != w.status || !contains(r.Message, w.msg) ||
				(w.user == nil) != (r.UserID == nil) || (w.user != nil && *r.UserID != w.user.ID) {
				t.Errorf("row %d = %+v (user %v), want %s %q", i+1, r, r.UserID, w.status, w.msg)
			}
		}
		if rows[0].ImportedData["Note"] != "a" || rows[9].ImportedData["Note"] != "" || rows[0].ImportedData["Primary Email"] != "user0@example.com" {
			t.Errorf("imported data = %v / %v", rows[0].ImportedData, rows[9].ImportedData)
		}
		if mapped := listUploadRows(t, m, f.org.ID, up.ID, `status eq "MAPPED"`); len(mapped) != 3 {
			t.Errorf("%d MAPPED rows, want 3", len(mapped))
		}

		// Another organization, or another action, does not see it.
		other := modeltest.NewOrg(t, f.store)
		if _, err = m.GetUpload(ctx, other.ID, management.ActionDeleteUsers, up.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other org GetUpload = %v", err)
		}
		if _, err = m.GetUpload(ctx, f.org.ID, management.ActionMoveUsers, up.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other action GetUpload = %v", err)
		}
		if _, _, err = m.DeleteUploadRows(ctx, other.ID, management.ActionDeleteUsers, up.ID, []int64{1}, ""); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other org delete = %v", err)
		}

		// Delete by ids, then by filter.
		removed, n, err := m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, []int64{4, 99, 5}, "")
		if err != nil || n != 2 || !slices.Equal(removed, []bool{true, false, true}) {
			t.Errorf("delete by ids = %v, %d, %v", removed, n, err)
		}
		_, n, err = m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, nil, `status eq "INVALID"`)
		if err != nil || n != 4 {
			t.Errorf("delete by filter = %d, %v", n, err)
		}
		for _, bad := range []string{`nope eq "x"`, `status eq`} {
			if _, _, err := m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, nil, bad); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("filter %q = %v, want EINVALID", bad, err)
			}
		}
		if _, _, err := m.DeleteUploadRows(ctx, f.org.ID, management.ActionDeleteUsers, up.ID, nil, ""); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("no selector = %v, want EINVALID", err)
		}
		got, _ = m.GetUpload(ctx, f.org.ID, management.ActionDeleteUsers, up.ID)
		if left := listUploadRows(t, m, f.org.ID, up.ID, ""); len(left) != 4 || got.RowCount != 4 {
			t.Errorf("%d rows left, row_count %d; want 4", len(left), got.RowCount)
		}

		// A header-only file, and one beyond the synchronous limit.
		header, match, _ := management.UploadHeader([]string{"Primary Email"})
		empty := &management.MgmtUpload{OrgID: f.org.ID, Action: management.ActionMoveUsers, Header: header, MatchColumns: match}
		modeltest.WantCode(t, m.CreateUpload(ctx, empty, nil), models.EINVALID)
		modeltest.WantCode(t, m.CreateUpload(ctx, empty, make([]management.UploadRecord, management.MaxUploadRowsSync+1)), models.EINVALID)
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func listUploadRows(t *testing.T, m *management.MgmtStore, orgID, uploadID int64, filter string) []management.UploadRow {
	t.Helper()
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	p, err := listing.Parse(q, management.UploadRowListing)
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := m.ListUploadRows(t.Context(), orgID, management.ActionDeleteUsers, uploadID, p)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
