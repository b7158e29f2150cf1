package models_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/dbtest"
	"iam/models/listing"
)

func TestParseMgmtAction(t *testing.T) {
	for in, want := range map[string]models.MgmtAction{"move-users": models.ActionMoveUsers, "move-user": models.ActionMoveUsers,
		"delete-users": models.ActionDeleteUsers, "delete-user": models.ActionDeleteUsers} {
		if got, ok := models.ParseMgmtAction(in); !ok || got != want {
			t.Errorf("ParseMgmtAction(%q) = %q, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "Move-Users", "disable-users", "move-users "} {
		if _, ok := models.ParseMgmtAction(in); ok {
			t.Errorf("ParseMgmtAction(%q) accepted", in)
		}
	}
}

func TestMgmtStore_ViewColumns(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := t.Context()
		store := models.NewStore(db)
		org, other := newOrg(t, store), newOrg(t, store)
		m := store.Management
		got, err := m.ViewColumns(ctx, org.ID, models.ActionMoveUsers)
		if err != nil || !slices.Equal(got, models.DefaultViewColumns(models.ActionMoveUsers)) {
			t.Fatalf("default = %v, %v", got, err)
		}
		want := []string{"email", "container", "department"}
		if _, err := m.SetViewColumns(ctx, org.ID, models.ActionMoveUsers, want); err != nil {
			t.Fatal(err)
		}
		if _, err := m.SetViewColumns(ctx, org.ID, models.ActionMoveUsers, []string{"email", "title"}); err != nil {
			t.Fatal(err) // replaced, not added to
		}
		got, _ = m.ViewColumns(ctx, org.ID, models.ActionMoveUsers)
		if !slices.Equal(got, []string{"email", "title"}) {
			t.Errorf("after set = %v", got)
		}
		// Per action and per organization.
		if got, _ := m.ViewColumns(ctx, org.ID, models.ActionDeleteUsers); !slices.Equal(got, models.DefaultViewColumns(models.ActionDeleteUsers)) {
			t.Errorf("delete-users columns = %v, want the default", got)
		}
		if got, _ := m.ViewColumns(ctx, other.ID, models.ActionMoveUsers); !slices.Equal(got, models.DefaultViewColumns(models.ActionMoveUsers)) {
			t.Errorf("other organization's columns = %v, want the default", got)
		}
		many := make([]string, models.MaxViewColumns+1)
		for i := range many {
			many[i] = "email"
		}
		for _, bad := range [][]string{nil, {"password"}, {"email", "email"}, {"primarySource"}, {"passwordHash"}, many} {
			if _, err := m.SetViewColumns(ctx, org.ID, models.ActionMoveUsers, bad); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("SetViewColumns(%v) = %v, want EINVALID", bad, err)
			}
		}
		if got, _ := m.ViewColumns(ctx, org.ID, models.ActionMoveUsers); !slices.Equal(got, []string{"email", "title"}) {
			t.Errorf("a refused set changed the columns: %v", got)
		}
	})
}

func TestUploadHeader(t *testing.T) {
	header, match, err := models.UploadHeader([]string{" primary email ", "Department", "EMPLOYEE ID"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(match, []string{"Primary Email", "Employee ID"}) || header[0] != (models.UploadColumn{Name: "Primary Email", IsMatchColumn: true}) ||
		header[1] != (models.UploadColumn{Name: "Department"}) {
		t.Errorf("header %+v, match %v", header, match)
	}
	for _, bad := range [][]string{{"Department"}, {"Primary Email", "primary email"}, {"Primary Email", ""}} {
		if _, _, err := models.UploadHeader(bad); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("UploadHeader(%q) = %v, want EINVALID", bad, err)
		}
	}
	var me *models.Error
	if _, _, err := models.UploadHeader([]string{"User ID", "user id"}); !asError(err, &me) || len(me.Causes) != 1 || me.Causes[0].Title != "DUPLICATE_COLUMNS" {
		t.Errorf("duplicate columns = %v", err)
	}
}

// mgmtFixture is an organization with five users: u[0..4], u[3] and u[4]
// sharing a mobile number.
type mgmtFixture struct {
	store *models.Store
	org   *models.Organization
	users []*models.User
}

func newMgmtFixture(t *testing.T, db *bun.DB) *mgmtFixture {
	store := models.NewStore(db)
	f := &mgmtFixture{store: store, org: newOrg(t, store)}
	for i := range 5 {
		u := models.User{Email: fmt.Sprintf("User%d@Example.com", i), FirstName: fmt.Sprintf("F%d", i), LastName: "L",
			EmployeeID: fmt.Sprintf("E%d", i), Department: "Sales"}
		if i >= 3 {
			u.MobileNumber = "+49 555"
		}
		f.users = append(f.users, mkUser(t, store.Users, f.org.ID, u))
	}
	return f
}

func records(rows [][]string) []models.UploadRecord {
	out := make([]models.UploadRecord, len(rows))
	for i, r := range rows {
		out[i] = models.UploadRecord{Fields: r}
	}
	return out
}

func (f *mgmtFixture) upload(t *testing.T, a models.MgmtAction, names []string, rows [][]string) *models.MgmtUpload {
	t.Helper()
	header, match, err := models.UploadHeader(names)
	if err != nil {
		t.Fatal(err)
	}
	up := &models.MgmtUpload{OrgID: f.org.ID, Action: a, FileName: "u.csv", Header: header, MatchColumns: match}
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
		up := f.upload(t, models.ActionDeleteUsers, []string{"Primary Email", "Employee ID", "Mobile Number", "User ID", "Note"}, [][]string{
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
		got, err := m.GetUpload(ctx, f.org.ID, models.ActionDeleteUsers, up.ID)
		if err != nil || got.RowCount != 10 || len(got.Header) != 5 || got.Header[4].IsMatchColumn || !got.Header[3].IsMatchColumn {
			t.Fatalf("GetUpload = %+v, %v", got, err)
		}
		rows := listUploadRows(t, m, f.org.ID, up.ID, "")
		want := []struct {
			status string
			user   *models.User
			msg    string
		}{
			{models.RowMapped, u[0], ""}, {models.RowMapped, u[1], ""}, {models.RowDuplicateUser, u[0], "row 1"},
			{models.RowNotFound, nil, "nobody@example.com"}, {models.RowNotFound, nil, "matches 2 users"},
			{models.RowInvalid, nil, "no value in a match column"}, {models.RowInvalid, nil, "12ab"},
			{models.RowInvalid, nil, "different users"}, {models.RowInvalid, nil, "6 cells"}, {models.RowMapped, u[2], ""},
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
		other := newOrg(t, f.store)
		if _, err = m.GetUpload(ctx, other.ID, models.ActionDeleteUsers, up.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other org GetUpload = %v", err)
		}
		if _, err = m.GetUpload(ctx, f.org.ID, models.ActionMoveUsers, up.ID); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other action GetUpload = %v", err)
		}
		if _, _, err = m.DeleteUploadRows(ctx, other.ID, models.ActionDeleteUsers, up.ID, []int64{1}, ""); models.ErrorCode(err) != models.ENOTFOUND {
			t.Errorf("other org delete = %v", err)
		}

		// Delete by ids, then by filter.
		removed, n, err := m.DeleteUploadRows(ctx, f.org.ID, models.ActionDeleteUsers, up.ID, []int64{4, 99, 5}, "")
		if err != nil || n != 2 || !slices.Equal(removed, []bool{true, false, true}) {
			t.Errorf("delete by ids = %v, %d, %v", removed, n, err)
		}
		_, n, err = m.DeleteUploadRows(ctx, f.org.ID, models.ActionDeleteUsers, up.ID, nil, `status eq "INVALID"`)
		if err != nil || n != 4 {
			t.Errorf("delete by filter = %d, %v", n, err)
		}
		for _, bad := range []string{`nope eq "x"`, `status eq`} {
			if _, _, err := m.DeleteUploadRows(ctx, f.org.ID, models.ActionDeleteUsers, up.ID, nil, bad); models.ErrorCode(err) != models.EINVALID {
				t.Errorf("filter %q = %v, want EINVALID", bad, err)
			}
		}
		if _, _, err := m.DeleteUploadRows(ctx, f.org.ID, models.ActionDeleteUsers, up.ID, nil, ""); models.ErrorCode(err) != models.EINVALID {
			t.Errorf("no selector = %v, want EINVALID", err)
		}
		got, _ = m.GetUpload(ctx, f.org.ID, models.ActionDeleteUsers, up.ID)
		if left := listUploadRows(t, m, f.org.ID, up.ID, ""); len(left) != 4 || got.RowCount != 4 {
			t.Errorf("%d rows left, row_count %d; want 4", len(left), got.RowCount)
		}

		// A header-only file, and one beyond the synchronous limit.
		header, match, _ := models.UploadHeader([]string{"Primary Email"})
		empty := &models.MgmtUpload{OrgID: f.org.ID, Action: models.ActionMoveUsers, Header: header, MatchColumns: match}
		wantCode(t, m.CreateUpload(ctx, empty, nil), models.EINVALID)
		wantCode(t, m.CreateUpload(ctx, empty, make([]models.UploadRecord, models.MaxUploadRowsSync+1)), models.EINVALID)
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func listUploadRows(t *testing.T, m *models.MgmtStore, orgID, uploadID int64, filter string) []models.UploadRow {
	t.Helper()
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	p, err := listing.Parse(q, models.UploadRowListing)
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := m.ListUploadRows(t.Context(), orgID, models.ActionDeleteUsers, uploadID, p)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
