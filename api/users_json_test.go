package api

import (
	"encoding/json"
	"testing"
	"time"

	"iam/models"
)

// TestUserView_AppendJSONMatchesEncodingJSON compares the hand-written
// encoder with encoding/json on awkward text.
func TestUserView_AppendJSONMatchesEncodingJSON(t *testing.T) {
	manager := int64(42)
	for _, text := range []string{"", "plain", "quote \" back \\ slash", "<tag> & co", "tab\tnew\nline\r\x00\x1f", "ünïcödé ✓ 😀", "bad \xff utf8", "sep \u2028 \u2029"} {
		u := &models.User{ID: 7, FirstName: text, LastName: text, Description: text, Email: "a@example.com", Status: 1,
			ManagerID: &manager, IsLicensed: true, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC), UpdatedAt: time.Now()}
		for _, v := range []userView{newUserView(u), func() userView { w := newUserView(u); w.Manager, w.PrimarySource = nil, nil; return w }()} {
			got := v.appendJSON(nil)
			want, _ := json.Marshal(&v)
			if string(got) != string(want) {
				t.Errorf("text %q:\n got %s\nwant %s", text, got, want)
			}
		}
	}
}
