package scim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/models"
	"iam/models/identity"
)

type obj = map[string]any

// scimClient sends SCIM requests with a bearer token, as a provisioning
// engine does.
type scimClient struct {
	t     *testing.T
	env   *apitest.Env
	token string
}

type reply struct {
	status int
	header http.Header
	body   obj
	raw    []byte
}

func newEnv(t *testing.T, db *bun.DB) (*apitest.Env, *scimClient) {
	env := apitest.New(t, db, apitest.Options{})
	_, secret, err := env.Store.ProvisioningTokens.Create(context.Background(), env.Org.ID, "Provisioning", nil)
	if err != nil {
		t.Fatal(err)
	}
	return env, &scimClient{t: t, env: env, token: secret}
}

// do sends method path with body (JSON, or a string as it is) and header
// pairs; it checks that every answer with a body is SCIM JSON, and every
// answer against the OpenAPI document.
func (c *scimClient) do(method, path string, body any, header ...string) reply {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.env.URL+"/scim/v2"+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/scim+json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	apitest.CheckResponse(c.t, req, resp, raw) // the OpenAPI document's /scim/v2
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/scim+json") {
			c.t.Fatalf("%s %s: content type %q: %s", method, path, ct, raw)
		}
		if err := json.Unmarshal(raw, &out.body); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return out
}

// want fails the test unless the reply has status.
func (r reply) want(t *testing.T, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// wantError fails the test unless the reply is a SCIM error of status and
// scimType.
func (r reply) wantError(t *testing.T, status int, scimType string) {
	t.Helper()
	r.want(t, status)
	schemas, _ := r.body["schemas"].([]any)
	if len(schemas) != 1 || schemas[0] != "urn:ietf:params:scim:api:messages:2.0:Error" || r.body["status"] != itoa(status) {
		t.Fatalf("not a SCIM error: %s", r.raw)
	}
	if got, _ := r.body["scimType"].(string); got != scimType {
		t.Fatalf("scimType %q, want %q: %s", got, scimType, r.raw)
	}
}

func itoa(n int) string { return models.FormatID(int64(n)) }

func (r reply) id() string { return r.body["id"].(string) }

func (r reply) total() int { return int(r.body["totalResults"].(float64)) }

func (r reply) resources() []obj {
	list, _ := r.body["Resources"].([]any)
	out := make([]obj, len(list))
	for i := range list {
		out[i] = list[i].(obj)
	}
	return out
}

// user reads a user of the organization through the store.
func user(t *testing.T, env *apitest.Env, id string) *identity.User {
	t.Helper()
	n, err := models.ParseID("id", id)
	if err != nil {
		t.Fatal(err)
	}
	u, err := env.Store.Users.Get(context.Background(), env.Org.ID, n)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func memberValues(r reply) []string {
	list, _ := r.body["members"].([]any)
	out := make([]string, len(list))
	for i := range list {
		out[i] = list[i].(obj)["value"].(string)
	}
	return out
}

func q(s string) string {
	return strings.NewReplacer(" ", "%20", `"`, "%22", "[", "%5B", "]", "%5D").Replace(s)
}
