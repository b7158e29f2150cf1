package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/sqldb"
)

// BenchmarkUsers_List pages GET /api/v1/users?limit=100 through 10,000
// users on PostgreSQL, calling the API's handler (every middleware, the
// store, the JSON) without a network in between.
func BenchmarkUsers_List(b *testing.B) {
	db := dbtest.Postgres(b)
	env := apitest.New(b, db, apitest.Options{})
	ctx := b.Context()
	now := time.Now().UTC()
	for chunk := range 10 {
		batch := make([]identity.User, 1000)
		for i := range batch {
			n := chunk*1000 + i
			batch[i] = identity.User{ID: sqldb.NewID(), OrgID: env.Org.ID, FirstName: fmt.Sprintf("First%d", n),
				LastName: fmt.Sprintf("Last%d", n), DisplayName: fmt.Sprintf("First%d Last%d", n, n),
				Email: fmt.Sprintf("user%05d@example.com", n), EmployeeID: fmt.Sprintf("E%05d", n),
				Department: "Dept", Title: "Engineer", Country: "DE", Status: 1, IsLicensed: true,
				Role: identity.RoleUser, CreatedAt: now, UpdatedAt: now}
		}
		if _, err := db.NewInsert().Model(&batch).Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "VACUUM ANALYZE users"); err != nil {
		b.Fatal(err)
	}
	handler := env.Server.Handler()
	auth := auth.Scheme + " " + env.Token(env.Org, "svc.user.READ")
	cursor := ""
	w := &pageWriter{}
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		q := url.Values{"limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/users?"+q.Encode(), nil)
		req.Header.Set("Authorization", auth)
		w.reset()
		handler.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d: %s", w.code, w.body)
		}
		cursor = nextCursor(w.body)
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// nextCursor finds meta.next_cursor in a list body.
func nextCursor(body []byte) string {
	const key = `"next_cursor":"`
	i := bytes.LastIndex(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// pageWriter is a ResponseWriter that keeps the last response in buffers
// it reuses, as a server's connection would, unlike httptest's recorder.
type pageWriter struct {
	header http.Header
	code   int
	body   []byte
}

func (w *pageWriter) reset() {
	if w.header == nil {
		w.header = http.Header{}
	}
	clear(w.header)
	w.code, w.body = 0, w.body[:0]
}

func (w *pageWriter) Header() http.Header { return w.header }

func (w *pageWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *pageWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, b...)
	return len(b), nil
}
