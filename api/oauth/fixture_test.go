package oauth_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"

	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/oauthstore"
	"iam/models/store"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testSecret is the global secret of every test server.
var testSecret = []byte("test secret of at least thirty-two bytes")

const adminPassword = "correct horse battery"

// auditSeed is the seed of the test servers' audit signing key.
var auditSeed = []byte("audit signing key seed: 32 bytes")

// fixture is the API with the real authorization server in front of a real
// database: an organization with an admin, a plain user and clients.
type fixture struct {
	t       *testing.T
	db      *bun.DB
	env     *apitest.Env
	holder  *late
	srv     *oauth.Server
	cfg     oauth.Config
	users   *identity.UserStore
	clients *oauthstore.ClientStore
	admin   *identity.User
	user    *identity.User
}

// late lets the API be built before the authorization server, which needs
// the API's URL as its issuer.
type late struct{ srv atomic.Pointer[oauth.Server] }

func (l *late) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.srv.Load().Handler().ServeHTTP(w, r)
}

func (l *late) ValidateAccessToken(ctx context.Context, tok string) (*auth.Principal, error) {
	return l.srv.Load().ValidateAccessToken(ctx, tok)
}

// newFixture starts the API and the authorization server. edit, when not
// nil, changes the server's configuration (lifespans, rate limits).
func newFixture(t *testing.T, db *bun.DB, temporal bool, edit func(*oauth.Config)) *fixture {
	t.Helper()
	l := &late{}
	// The API serves the audit digests' public key (GET
	// /audit-digests/public-key answers it, not 404).
	signer, err := audit.NewSigner(auditSeed)
	if err != nil {
		t.Fatal(err)
	}
	env := apitest.New(t, db, apitest.Options{Temporal: temporal, Tokens: l, OAuth: l, AuditSigner: signer})
	f := &fixture{t: t, db: db, env: env, holder: l, users: store.NewStore(db).Users, clients: store.NewStore(db).OAuthClients}
	f.cfg = oauth.Config{Issuer: env.URL, Secret: testSecret}
	if edit != nil {
		edit(&f.cfg)
	}
	f.srv = f.newServer(f.cfg)
	l.srv.Store(f.srv)
	f.admin = f.newUser(env.Org, "admin@example.com", identity.RoleAdmin)
	f.user = f.newUser(env.Org, "user@example.com", identity.RoleUser)
	return f
}

// newServer builds another authorization server over the fixture's store.
func (f *fixture) newServer(cfg oauth.Config) *oauth.Server {
	f.t.Helper()
	srv, err := oauth.New(cfg, oauth.Deps{Store: f.env.Store})
	if err != nil {
		f.t.Fatalf("oauth.New: %v", err)
	}
	return srv
}

func (f *fixture) newUser(org *identity.Organization, email string, role identity.Role) *identity.User {
	f.t.Helper()
	u := &identity.User{OrgID: org.ID, Email: email, Role: role, Status: identity.UserActive}
	if err := f.users.Create(context.Background(), u, adminPassword); err != nil {
		f.t.Fatalf("create user %s: %v", email, err)
	}
	return u
}

// client registers a client of org; it returns the client and its secret.
func (f *fixture) client(org *identity.Organization, typ oauthstore.ClientType, redirectURIs ...string) (*oauthstore.OAuthClient, string) {
	f.t.Helper()
	c := &oauthstore.OAuthClient{OrgID: org.ID, Name: "Test " + string(typ) + " app", HomepageURL: "https://app.example.com",
		Type: typ, RedirectURIs: redirectURIs}
	secret, err := f.clients.Create(context.Background(), c)
	if err != nil {
		f.t.Fatalf("create client: %v", err)
	}
	return c, secret
}

// issue issues tokens directly (the self client's way).
func (f *fixture) issue(srv *oauth.Server, client *oauthstore.OAuthClient, user *identity.User, offline bool, scopes ...string) *oauth.TokenResponse {
	f.t.Helper()
	tok, err := srv.IssueToken(context.Background(), oauth.IssueRequest{
		ClientID: client.ID, OrgID: user.OrgID, UserID: user.ID, Scopes: scopes, Offline: offline,
	})
	if err != nil {
		f.t.Fatalf("IssueToken: %v", err)
	}
	return tok
}

// apiStatus calls GET path of the API with the token in the one accepted way.
func (f *fixture) apiStatus(path, token string) int {
	f.t.Helper()
	return f.env.Get(path, token).Status
}

// response is a finished HTTP exchange of a browser or client.
type response struct {
	status int
	header http.Header
	body   string
}

// location parses the Location header.
func (r *response) location(t *testing.T) *url.URL {
	t.Helper()
	u, err := url.Parse(r.header.Get("Location"))
	if err != nil || r.header.Get("Location") == "" {
		t.Fatalf("no usable Location (status %d): %q\n%s", r.status, r.header.Get("Location"), r.body)
	}
	return u
}

// oauthError decodes an RFC 6749 error body.
func (r *response) oauthError(t *testing.T) (code, description string) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("status %d body is not JSON: %s", r.status, r.body)
	}
	for k := range body {
		if k != "error" && k != "error_description" {
			t.Errorf("OAuth error body has field %q beyond RFC 6749's: %s", k, r.body)
		}
	}
	code, _ = body["error"].(string)
	description, _ = body["error_description"].(string)
	return code, description
}

// browser is a cookie-keeping HTTP client that does not follow redirects,
// standing in for a browser where the pages' HTML alone is tested.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: f.t, base: f.env.URL, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends req and checks the answer against the OpenAPI document, as every
// test helper does.
func (b *browser) do(req *http.Request) *response {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	apitest.CheckResponse(b.t, req, resp, body)
	return &response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// unknown GETs a path the OpenAPI document does not have on purpose: its
// answer must be the document's OAuth error body.
func (b *browser) unknown(path string) *response {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }() // only read: a close error tells the test nothing
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	apitest.CheckErrorOfUnknownRoute(b.t, req, resp, body, "OAuthError")
	return &response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(rawURL string) *response {
	b.t.Helper()
	if strings.HasPrefix(rawURL, "/") {
		rawURL = b.base + rawURL
	}
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) *response {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`)

// formFields returns the hidden fields of the page's form.
func formFields(t *testing.T, page *response) url.Values {
	t.Helper()
	out := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page.body, -1) {
		out.Set(m[1], html.UnescapeString(m[2]))
	}
	if out.Get("csrf_token") == "" || out.Get("request") == "" {
		t.Fatalf("the page (status %d) has no form with csrf_token and request:\n%s", page.status, page.body)
	}
	return out
}

// signIn opens the authorization URL and submits the sign-in form; it
// returns the answer to the form.
func (b *browser) signIn(authURL, email, password string) *response {
	b.t.Helper()
	page := b.get(authURL)
	if page.status != http.StatusOK || !strings.Contains(page.body, `action="/oauth/v2/login"`) {
		b.t.Fatalf("GET %s: want the sign-in page, got %d:\n%s", authURL, page.status, page.body)
	}
	form := formFields(b.t, page)
	form.Set("email", email)
	form.Set("password", password)
	return b.post("/oauth/v2/login", form)
}

// decide opens the consent page of authURL (signed in) and submits the
// decision; it returns the answer, a redirect to the client.
func (b *browser) decide(authURL, decision string) *response {
	b.t.Helper()
	page := b.get(authURL)
	if page.status != http.StatusOK || !strings.Contains(page.body, `action="/oauth/v2/consent"`) {
		b.t.Fatalf("GET %s: want the consent page, got %d:\n%s", authURL, page.status, page.body)
	}
	form := formFields(b.t, page)
	form.Set("decision", decision)
	return b.post("/oauth/v2/consent", form)
}

// authURL builds an authorization URL of the fixture's server.
func (f *fixture) authURL(params url.Values) string {
	return f.env.URL + "/oauth/v2/auth?" + params.Encode()
}

// authParams are the parameters of a code request of client.
func authParams(client *oauthstore.OAuthClient, scope string, extra ...string) url.Values {
	v := url.Values{
		"client_id":     {client.ID},
		"response_type": {"code"},
		"redirect_uri":  {client.RedirectURIs[0]},
		"scope":         {scope},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

// code runs the flow without a browser up to the redirect with the code:
// sign in as the admin, allow. It returns the redirect's query.
func (f *fixture) code(params url.Values) url.Values {
	f.t.Helper()
	b := f.browser()
	authURL := f.authURL(params)
	if r := b.signIn(authURL, f.admin.Email, adminPassword); r.status != http.StatusSeeOther {
		f.t.Fatalf("sign-in: want 303, got %d:\n%s", r.status, r.body)
	}
	r := b.decide(authURL, "allow")
	if r.status != http.StatusSeeOther {
		f.t.Fatalf("consent: want 303, got %d:\n%s", r.status, r.body)
	}
	q := r.location(f.t).Query()
	if q.Get("code") == "" {
		f.t.Fatalf("no code in the redirect %s", r.header.Get("Location"))
	}
	return q
}

// tokenCall posts to the token endpoint; query goes in the query string,
// form in the body.
func (f *fixture) tokenCall(path string, query, form url.Values) *response {
	f.t.Helper()
	u := f.env.URL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(http.MethodPost, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return (&browser{t: f.t, client: http.DefaultClient}).do(req)
}

// exchange trades a code at the token endpoint with form parameters.
func (f *fixture) exchange(client *oauthstore.OAuthClient, secret, code, redirectURI string, extra ...string) *response {
	f.t.Helper()
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"client_id":     {client.ID},
		"client_secret": {secret},
		"redirect_uri":  {redirectURI},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		form.Set(extra[i], extra[i+1])
	}
	return f.tokenCall("/oauth/v2/token", nil, form)
}

// tokens decodes a successful token response.
func (r *response) tokens(t *testing.T) oauth.TokenResponse {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("token endpoint: %d %s", r.status, r.body)
	}
	var tok oauth.TokenResponse
	if err := json.Unmarshal([]byte(r.body), &tok); err != nil {
		t.Fatal(err)
	}
	return tok
}
