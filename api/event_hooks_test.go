package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models/dbtest"
	"iam/models/hooks"
)

// receiver is a webhook receiver on 127.0.0.1 recording every request; fail
// says how many first requests of each webhook-id it answers 500.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []receivedHook
	fail int
	seen map[string]int
}

type receivedHook struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Status  int               `json:"-"`
}

func newReceiver(t *testing.T, fail int) *receiver {
	r := &receiver{fail: fail, seen: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		id := req.Header.Get("webhook-id")
		r.mu.Lock()
		r.seen[id]++
		status := http.StatusOK
		if r.seen[id] <= r.fail {
			status = http.StatusInternalServerError
		}
		r.got = append(r.got, receivedHook{Headers: map[string]string{"webhook-id": id,
			"webhook-timestamp": req.Header.Get("webhook-timestamp"), "webhook-signature": req.Header.Get("webhook-signature")},
			Body: string(body), Status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []receivedHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedHook(nil), r.got...)
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verifyWithReference checks messages with the npm package standardwebhooks
// (the specification's reference verifier), installed once into a cache
// folder. Skips when node or npm is missing.
func verifyWithReference(t *testing.T, secret string, msgs []receivedHook) {
	t.Helper()
	if out, err := referenceVerify(t, secret, msgs); err != nil {
		t.Fatalf("the reference verifier refused: %v\n%s", err, out)
	}
}

// referenceVerify runs the reference verifier over msgs.
func referenceVerify(t *testing.T, secret string, msgs []receivedHook) ([]byte, error) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the independent Standard Webhooks verifier (npm standardwebhooks) cannot run")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the independent Standard Webhooks verifier (npm standardwebhooks) cannot be installed")
	}
	dir := filepath.Join(os.TempDir(), "iam-test-standardwebhooks")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); serr != nil {
		if merr := os.MkdirAll(dir, 0o750); merr != nil {
			t.Fatal(merr)
		}
		//nolint:gosec // G204: npm found on PATH, fixed arguments
		out, ierr := exec.Command(npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", "standardwebhooks@1.3.0").CombinedOutput()
		if ierr != nil {
			t.Skipf("npm install standardwebhooks failed (no registry?): %v %s", ierr, out)
		}
	}
	script, err := filepath.Abs("testdata/verify-standardwebhooks.js")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"secret": secret, "messages": msgs})
	cmd := exec.Command(node, script) //nolint:gosec // G204: node found on PATH, the test's own script
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	return cmd.CombinedOutput()
}

func hookEnv(t *testing.T, db *bun.DB, allow ...string) *apitest.Env {
	var prefixes []netip.Prefix
	for _, a := range allow {
		prefixes = append(prefixes, netip.MustParsePrefix(a))
	}
	env := apitest.New(t, db, apitest.Options{Temporal: true, EventHookAllowPrivate: prefixes, EventHookPoll: 20 * time.Millisecond,
		EventHookPolicy: hooks.Policy{Schedule: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
			50 * time.Millisecond}, DisableAfter: time.Hour}})
	env.Store.Hooks.SetURLPolicy(hooks.URLPolicy{AllowHTTP: true})
	return env
}

type createdHook struct {
	Data struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	} `json:"data"`
}

func createHook(t *testing.T, env *apitest.Env, tok, url string, types ...string) createdHook {
	t.Helper()
	resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/event-hooks", Token: tok,
		Body: map[string]any{"url": url, "event_types": types, "description": "test"}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("create hook: %d %s", resp.Status, resp.Body)
	}
	var h createdHook
	resp.JSON(t, &h)
	return h
}

type deliveryList struct {
	Data []struct {
		ID           string `json:"id"`
		WebhookID    string `json:"webhook_id"`
		EventType    string `json:"event_type"`
		Status       string `json:"status"`
		AttemptCount int    `json:"attempt_count"`
		Attempts     []struct {
			StatusCode *int   `json:"status_code"`
			Error      string `json:"error"`
		} `json:"attempts"`
	} `json:"data"`
}

// TestEventHooks_DeliveredSignedAndRetried: a hook naming user.* and
// group.created receives each such change committed after it, signed so
// that the reference verifier accepts it (also after a rotation, with the
// old secret and the new); a receiver answering 500 three times then 200
// gets four attempts with one webhook-id; a hook of another organization
// answers 404 and a token without svc.event_hook.* 403.
func TestEventHooks_DeliveredSignedAndRetried(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := hookEnv(t, db, "127.0.0.0/8")
		tok := env.Token(env.Org, "svc.event_hook.ALL", "svc.user.ALL", "svc.group.ALL")
		ok := newReceiver(t, 0)
		flaky := newReceiver(t, 3)
		h := createHook(t, env, tok, ok.srv.URL+"/hook?token=abc", "user.*", "group.created")
		fh := createHook(t, env, tok, flaky.srv.URL, "group.*")

		for _, body := range []map[string]any{{"firstName": "Ann", "lastName": "A", "email": "ann@example.com"},
			{"firstName": "Bob", "lastName": "B", "email": "bob@example.com"}} {
			createdID(t, env, "/api/v1/users", tok, body, "")
		}
		createdID(t, env, "/api/v1/groups", tok, map[string]any{"name": "Hooked"}, "")
		waitFor(t, 20*time.Second, "three deliveries", func() bool { return len(ok.requests()) >= 3 })
		got := ok.requests()
		types := []string{}
		for _, r := range got {
			var p struct {
				Type      string          `json:"type"`
				Timestamp string          `json:"timestamp"`
				Data      json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal([]byte(r.Body), &p); err != nil || p.Timestamp == "" || len(p.Data) == 0 {
				t.Fatalf("body %s: %v", r.Body, err)
			}
			types = append(types, p.Type)
			if strings.Contains(r.Body, h.Data.Secret[len(hooks.SecretPrefix):]) {
				t.Fatal("the secret is in a delivery")
			}
		}
		// In event order: they succeeded first try.
		if strings.Join(types, ",") != "user.created,user.created,group.created" {
			t.Fatalf("types %v", types)
		}
		verifyWithReference(t, h.Data.Secret, got)
		// The verifier does refuse: a body changed by one byte.
		tampered := got[0]
		tampered.Body = strings.Replace(tampered.Body, "user.created", "user.createD", 1)
		if _, err := referenceVerify(t, h.Data.Secret, []receivedHook{tampered}); err == nil {
			t.Fatal("the reference verifier accepted a tampered body")
		}

		// The flaky receiver: 500, 500, 500, 200; one webhook-id.
		waitFor(t, 20*time.Second, "four attempts", func() bool { return len(flaky.requests()) >= 4 })
		fr := flaky.requests()
		for _, r := range fr {
			if r.Headers["webhook-id"] != fr[0].Headers["webhook-id"] {
				t.Fatalf("webhook-id changed across retries: %v", fr)
			}
		}
		verifyWithReference(t, fh.Data.Secret, fr)
		var dl deliveryList
		waitFor(t, 10*time.Second, "the delivery to succeed", func() bool {
			env.Get("/api/v1/event-hooks/"+fh.Data.ID+"/deliveries", tok).JSON(t, &dl)
			return len(dl.Data) == 1 && dl.Data[0].Status == hooks.StatusSucceeded
		})
		if d := dl.Data[0]; d.AttemptCount != 4 || len(d.Attempts) != 4 || *d.Attempts[0].StatusCode != 500 || *d.Attempts[3].StatusCode != 200 ||
			d.WebhookID != fr[0].Headers["webhook-id"] || len(fr) != 4 {
			t.Fatalf("delivery %+v after %d requests", d, len(fr))
		}
		env.Get("/api/v1/event-hooks/"+fh.Data.ID+"/deliveries?"+auditFilter(`status eq "failed"`), tok).JSON(t, &dl)
		if len(dl.Data) != 0 {
			t.Fatalf("failed deliveries: %+v", dl.Data)
		}

		// Rotation: both secrets sign for a day.
		var rot struct {
			Data struct {
				Secret string `json:"secret"`
			} `json:"data"`
		}
		resp := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/event-hooks/" + h.Data.ID + "/rotate-secret", Token: tok})
		resp.JSON(t, &rot)
		if rot.Data.Secret == "" || rot.Data.Secret == h.Data.Secret {
			t.Fatalf("rotate: %d %s", resp.Status, resp.Body)
		}
		if r := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/event-hooks/" + h.Data.ID + "/test", Token: tok}); r.Status != http.StatusAccepted {
			t.Fatalf("test: %d %s", r.Status, r.Body)
		}
		waitFor(t, 20*time.Second, "the test event", func() bool { return len(ok.requests()) >= 4 })
		last := ok.requests()[3]
		if !strings.Contains(last.Body, `"type":"hook.test"`) || strings.Count(last.Headers["webhook-signature"], "v1,") != 2 {
			t.Fatalf("test delivery %+v", last)
		}
		verifyWithReference(t, rot.Data.Secret, []receivedHook{last})
		verifyWithReference(t, h.Data.Secret, []receivedHook{last})

		// Tenant isolation and scopes.
		other := env.NewOrg("Other")
		if r := env.Get("/api/v1/event-hooks/"+h.Data.ID, env.Token(other, "svc.event_hook.ALL")); r.Status != http.StatusNotFound {
			t.Fatalf("another org's hook: %d", r.Status)
		}
		if r := env.Get("/api/v1/event-hooks/"+h.Data.ID+"/deliveries", env.Token(other, "svc.event_hook.ALL")); r.Status != http.StatusNotFound {
			t.Fatalf("another org's deliveries: %d", r.Status)
		}
		if r := env.Get("/api/v1/event-hooks/"+h.Data.ID, env.Token(env.Org, "svc.user.ALL")); r.Status != http.StatusForbidden {
			t.Fatalf("narrow token: %d", r.Status)
		}
		if r := env.Get("/api/v1/event-hooks/"+h.Data.ID, env.Token(env.Org, "svc.event_hook.READ")); r.Status != http.StatusOK || strings.Contains(string(r.Body), "whsec_") {
			t.Fatalf("read: %d %s", r.Status, r.Body)
		}
	})
}

// TestEventHooks_PrivateAddressRefusedAtDelivery: without
// IAM_EVENT_HOOKS_ALLOW_PRIVATE a hook whose name resolves to a loopback
// address is saved (the name could change) but refused when delivering:
// the receiver gets nothing and the attempt says why.
func TestEventHooks_PrivateAddressRefusedAtDelivery(t *testing.T) {
	db := dbtest.SQLite(t)
	env := hookEnv(t, db)
	tok := env.Token(env.Org, "svc.event_hook.ALL")
	rcv := newReceiver(t, 0)
	u := strings.Replace(rcv.srv.URL, "127.0.0.1", "localhost", 1)
	h := createHook(t, env, tok, u, "user.*")
	if r := env.Do(apitest.Request{Method: "POST", Path: "/api/v1/event-hooks/" + h.Data.ID + "/test", Token: tok}); r.Status != http.StatusAccepted {
		t.Fatalf("test: %d %s", r.Status, r.Body)
	}
	var dl deliveryList
	waitFor(t, 20*time.Second, "a refused attempt", func() bool {
		env.Get("/api/v1/event-hooks/"+h.Data.ID+"/deliveries", tok).JSON(t, &dl)
		return len(dl.Data) == 1 && len(dl.Data[0].Attempts) > 0
	})
	a := dl.Data[0].Attempts[0]
	if a.StatusCode != nil || !strings.HasPrefix(a.Error, "refused") {
		t.Fatalf("attempt %+v", a)
	}
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}
