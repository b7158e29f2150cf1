package api

import (
	"bytes"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// TestIdempotency_RoutesDocumentTheHeader: every route marked Idempotent
// documents the Idempotency-Key header and its 409 and 422 answers; no
// other route documents the header.
func TestIdempotency_RoutesDocumentTheHeader(t *testing.T) {
	doc, err := LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{}, Deps{Log: slog.New(slog.DiscardHandler)})
	marked := 0
	for _, rt := range s.Routes() {
		path := "/api/v1" + ginPathToOpenAPI(rt.Path)
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(rt.Method) == nil {
			continue // TestOpenAPI_DocumentsEveryRoute says so
		}
		op := item.GetOperation(rt.Method)
		documented := op.Parameters.GetByInAndName("header", IdempotencyKeyHeader) != nil
		if documented != rt.Idempotent {
			t.Errorf("%s %s: Idempotent %v, Idempotency-Key documented %v", rt.Method, path, rt.Idempotent, documented)
		}
		if !rt.Idempotent {
			continue
		}
		marked++
		for _, status := range []int{http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity} {
			if op.Responses.Status(status) == nil {
				t.Errorf("%s %s takes an Idempotency-Key but does not document %d", rt.Method, path, status)
			}
		}
	}
	if marked == 0 {
		t.Fatal("no route is Idempotent")
	}
}

// multipartOf is a form of fields (name, value; a name "file" is a file
// part) with the given boundary.
func multipartOf(t *testing.T, boundary string, fields [][2]string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f[0] == "file" {
			fw, err := w.CreateFormFile("file", "users.csv")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fw.Write([]byte(f[1])); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// fingerprintOf streams body through a fingerprint in small writes.
func fingerprintOf(t *testing.T, method, target, contentType string, body []byte) string {
	t.Helper()
	r, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", contentType)
	fp := newFingerprint(r)
	for len(body) > 0 {
		n := min(len(body), 7)
		if _, err := fp.Write(body[:n]); err != nil {
			t.Fatal(err)
		}
		body = body[n:]
	}
	return fp.sum()
}

// TestFingerprint_FormByItsParts: a multipart form is the same request
// whatever its boundary, and another one when a part, the path, the query
// or the method differs; a body that does not parse is fingerprinted by
// its bytes; a JSON body by its bytes.
func TestFingerprint_FormByItsParts(t *testing.T) {
	fields := [][2]string{{"factor_configs", "1,2"}, {"file", "Primary Email\nann@example.com\n"}}
	body1, ct1 := multipartOf(t, "boundary-one", fields)
	body2, ct2 := multipartOf(t, "another-boundary-2", fields)
	const target = "http://x/api/v1/protection/quick-enrollment/upload-csv"
	base := fingerprintOf(t, "POST", target, ct1, body1)
	if got := fingerprintOf(t, "POST", target, ct2, body2); got != base {
		t.Errorf("the same form with another boundary fingerprints differently")
	}
	otherFile, ctOther := multipartOf(t, "boundary-one", [][2]string{fields[0], {"file", "Primary Email\nbob@example.com\n"}})
	otherField, _ := multipartOf(t, "boundary-one", [][2]string{{"factor_configs", "1"}, fields[1]})
	for name, fp := range map[string]string{
		"another file":   fingerprintOf(t, "POST", target, ctOther, otherFile),
		"another field":  fingerprintOf(t, "POST", target, ct1, otherField),
		"another path":   fingerprintOf(t, "POST", "http://x/api/v1/protection/quick-enrollment/upload-smartcards", ct1, body1),
		"a query":        fingerprintOf(t, "POST", target+"?x=1", ct1, body1),
		"another method": fingerprintOf(t, "PUT", target, ct1, body1),
		"cut short":      fingerprintOf(t, "POST", target, ct1, body1[:len(body1)/2]),
	} {
		if fp == base {
			t.Errorf("%s fingerprints as the first form", name)
		}
	}
	bad1 := fingerprintOf(t, "POST", target, ct1, []byte("not a form at all"))
	bad2 := fingerprintOf(t, "POST", target, ct1, []byte("not a form at all!"))
	if bad1 == bad2 || bad1 != fingerprintOf(t, "POST", target, ct1, []byte("not a form at all")) {
		t.Errorf("a body that does not parse is not fingerprinted by its bytes")
	}
	j1 := fingerprintOf(t, "POST", "http://x/api/v1/groups", "application/json", []byte(`{"name":"a"}`))
	if j1 == fingerprintOf(t, "POST", "http://x/api/v1/groups", "application/json", []byte(`{"name":"b"}`)) ||
		j1 != fingerprintOf(t, "POST", "http://x/api/v1/groups", "application/json", []byte(`{"name":"a"}`)) {
		t.Errorf("JSON bodies are not fingerprinted by their bytes")
	}
	if !strings.HasPrefix(ct1, "multipart/form-data") {
		t.Fatalf("content type %q", ct1)
	}
}
