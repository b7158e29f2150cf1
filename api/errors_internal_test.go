package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"iam/models"
	"iam/models/identity"
)

// TestErrors_OneAnswerDoesNotReachAnother: the causes of one request's 401
// (a models EUNAUTHORIZED error with causes) and what a handler adds to its
// own answer never show in another request's 401, and concurrent mappings
// each keep their own causes (run with -race: no shared value is written).
func TestErrors_OneAnswerDoesNotReachAnother(t *testing.T) {
	srv := newPlumbingServer(t)

	ae := toAPIError(&models.Error{Code: models.EUNAUTHORIZED, Detail: "x", Causes: []models.Cause{{Title: "email", Detail: "secret-cause"}}})
	ae.Body.Causes = append(ae.Body.Causes, models.Cause{Title: "added", Detail: "by a handler"})
	ae.Body.Detail = "changed by a handler"

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/test/panic", nil)
	req.Header.Set("Authorization", "Service-oauthtoken bad")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // only read: a close error tells the test nothing
	var body ErrorBody
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if resp.StatusCode != http.StatusUnauthorized || len(body.Error.Causes) != 0 || body.Error.Detail != "the OAuth token is invalid" {
		t.Fatalf("401 of another request: %d %s", resp.StatusCode, data)
	}

	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("cause-%d", i)
			for range 200 {
				for _, code := range []string{models.EUNAUTHORIZED, models.EINVALID} {
					got := toAPIError(&models.Error{Code: code, Causes: []models.Cause{{Title: "f", Detail: want}}})
					if len(got.Body.Causes) != 1 || got.Body.Causes[0].Detail != want {
						errs <- fmt.Sprintf("%s: causes %v, want %s", code, got.Body.Causes, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestErrors_MappingLeavesSharedValuesAlone: what a handler does to the
// answer mapped from a shared models error (a sentinel, an error with
// causes) does not write into that error.
func TestErrors_MappingLeavesSharedValuesAlone(t *testing.T) {
	src := &models.Error{Code: models.EINVALID, Field: "f", Detail: "d", Causes: []models.Cause{{Title: "a", Detail: "b"}}}
	for _, e := range []error{identity.ErrUserNotFound, src} {
		before := fmt.Sprintf("%+v", e)
		ae := toAPIError(e)
		ae.Body.Detail = "changed"
		if len(ae.Body.Causes) > 0 {
			ae.Body.Causes[0].Detail = "changed"
		}
		ae.Body.Causes = append(ae.Body.Causes, models.Cause{Title: "x"})
		if after := fmt.Sprintf("%+v", e); after != before {
			t.Errorf("mapping wrote into the error: %s, was %s", after, before)
		}
	}
}
