package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models/identity"
	"iam/models/listing"
)

// TestAppendUserJSON_MatchesEncodingJSON compares the hand-written
// encoder with encoding/json's encoding of the user's view, on awkward
// text, with and without a manager and a primary source, times in other
// zones than UTC.
func TestAppendUserJSON_MatchesEncodingJSON(t *testing.T) {
	manager := int64(42)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	for _, text := range []string{"", "plain", "quote \" back \\ slash", "<tag> & co", "tab\tnew\nline\r\x00\x1f\x7f", "ünïcödé ✓ 😀", "bad \xff utf8", "sep \u2028 \u2029"} {
		base := identity.User{ID: 7, FirstName: text, LastName: text, Description: text, Email: "a@example.com", Status: 1,
			IsLicensed: true, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), UpdatedAt: time.Now()}
		withAll := base
		withAll.ID, withAll.ManagerID, withAll.IsDomainVerified, withAll.Status = 382621712387010659, &manager, true, 0
		withAll.CreatedAt, withAll.UpdatedAt = base.CreatedAt.In(zone), time.Date(2026, 3, 4, 5, 6, 7, 0, zone)
		withAll.PrimarySource = &identity.PrimarySource{ID: text, ApplicationName: text, IsEnabled: false,
			ApplicationService: identity.ApplicationService{ID: "ad", Name: text, ServiceName: "AD", Logo: text},
			CreationTime:       time.Date(2025, 1, 2, 3, 4, 5, 6000, zone),
			ModifiedTime:       time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)}
		for _, u := range []identity.User{base, withAll} {
			got := appendUserJSON(nil, &u)
			want, _ := json.Marshal(newUserView(&u))
			if string(got) != string(want) {
				t.Errorf("text %q:\n got %s\nwant %s", text, got, want)
			}
		}
	}
}

// TestWriteUserPage_MatchesEncodingJSON compares whole pages written by hand
// with the page encoding/json writes, for cursor meta on first, middle
// and last pages and for offset meta.
func TestWriteUserPage_MatchesEncodingJSON(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	manager := int64(42)
	src := &identity.PrimarySource{ID: "ad-1", ApplicationName: "AD <x>", IsEnabled: true,
		ApplicationService: identity.ApplicationService{ID: "ad", Name: "Active Directory", ServiceName: "AD", Logo: "x"},
		CreationTime:       time.Date(2025, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600)),
		ModifiedTime:       time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)}
	users := []identity.User{
		{ID: 1, FirstName: "Ann", Email: "a@example.com", Status: 1, IsLicensed: true, CreatedAt: time.Unix(1, 0), UpdatedAt: time.Unix(2, 5000)},
		{ID: 382621712387010659, FirstName: "ünï \"q\" & <b>", ManagerID: &manager, PrimarySource: src, IsDomainVerified: true,
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), UpdatedAt: time.Now()},
	}
	cursor, next := "eyJoIjoiYWJjIiwiayI6WzFdfQ", "eyJoIjoiYWJjIiwiayI6WzJdfQ"
	for _, meta := range []listing.Meta{
		&listing.CursorMeta{NextCursor: &next, Limit: 2, Total: 7},
		&listing.CursorMeta{Cursor: &cursor, NextCursor: &next, Limit: 2, Total: 7},
		&listing.CursorMeta{Cursor: &cursor, IsLast: true, Limit: 100, Total: 2},
		&listing.OffsetMeta{StartIndex: listing.StartIndex{N: 3, Quoted: true}, Limit: 2, Total: 9},
	} {
		for _, page := range [][]identity.User{users, nil} {
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			if err := writeUserPage(c, page, nil, meta); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(gin.H{"data": viewsOf(page, newUserView), "meta": meta})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Code != 200 || rec.Body.String() != string(want) {
				t.Errorf("%d users, meta %+v:\n got %d %s\nwant %s", len(page), meta, rec.Code, rec.Body, want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
		}
	}
}

// BenchmarkWriteUserPage writes pages of 100 users as GET /users answers them.
func BenchmarkWriteUserPage(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	users := make([]identity.User, 100)
	now := time.Now().UTC()
	for i := range users {
		users[i] = identity.User{ID: 382621712387010659 + int64(i), OrgID: 1, FirstName: fmt.Sprintf("First%d", i),
			LastName: fmt.Sprintf("Last%d", i), DisplayName: fmt.Sprintf("First%d Last%d", i, i),
			Email: fmt.Sprintf("user%07d@example.com", i), EmployeeID: fmt.Sprintf("E%07d", i),
			Department: "Dept-07", Title: "Engineer", Country: "DE", Status: 1, IsLicensed: true, CreatedAt: now, UpdatedAt: now}
	}
	next := "eyJoIjoiYWJjIiwiayI6WzJdfQ"
	meta := &listing.CursorMeta{Cursor: &next, NextCursor: &next, Limit: 100, Total: 1000000}
	w := &discardWriter{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		c, _ := gin.CreateTestContext(w)
		if err := writeUserPage(c, users, nil, meta); err != nil {
			b.Fatal(err)
		}
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
