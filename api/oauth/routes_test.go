package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/activities"
	"iam/api"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/api/oauth"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/devices"
	"iam/models/enrollment"
	"iam/models/hooks"
	"iam/models/identity"
	"iam/models/management"
	"iam/models/modeltest"
	"iam/models/notification"
	"iam/models/oauthstore"
	"iam/models/protection"
	"iam/models/sqldb"
)

// fixtures make, for a path parameter, a resource of org and return its
// id. parents holds the ids already made for the parameters before it in the
// path; a fixture of a nested resource uses its parent's id from there, or
// makes a parent of its own when there is none. Every path parameter of
// every route needs one: TestRoutes_Security fails for a route whose
// parameter has none.
var fixtures = map[string]func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string{
	"event_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		// Every organization has its org.created event.
		evs := modeltest.Events(t, env.DB, org.ID)
		if len(evs) == 0 {
			t.Fatalf("event fixture: organization %d has no audit event", org.ID)
		}
		return evs[0].ID
	},
	"job_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		return models.FormatID(env.CreateDiagnostic(org, activities.DiagnosticParams{Items: 1}).ID)
	},
	"user_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string {
		u := &identity.User{OrgID: org.ID, Email: "fixture-" + models.FormatID(sqldb.NewID()) + "@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(context.Background(), u, ""); err != nil {
			t.Fatalf("user fixture: %v", err)
		}
		// Under a device, the user is enrolled offline on it.
		if dev, ok := devicesByID[parents["device_id"]]; ok {
			in := devices.CheckIn{Facts: dev.DeviceFacts, OfflineUsers: []devices.OfflineUserReport{{ID: models.FormatID(u.ID), UserName: u.Email}}}
			if _, err := env.Store.Devices.CheckIn(context.Background(), dev, &in); err != nil {
				t.Fatalf("offline user fixture: %v", err)
			}
		}
		return models.FormatID(u.ID)
	},
	"group_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		g := &identity.Group{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID())}
		if err := env.Store.Groups.Create(context.Background(), g, nil, nil); err != nil {
			t.Fatalf("group fixture: %v", err)
		}
		return models.FormatID(g.ID)
	},
	"schedule_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		return scheduleFixture(t, env, org)
	},
	"run_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string {
		scheduleID, ok := parents["schedule_id"]
		if !ok {
			scheduleID = scheduleFixture(t, env, org)
		}
		id, err := models.ParseID("schedule_id", scheduleID)
		if err != nil {
			t.Fatal(err)
		}
		run, err := env.Store.Notifications.PrepareRun(context.Background(), notification.PrepareRunInput{
			OrgID: org.ID, ScheduleID: id, ScheduledAt: time.Now().UTC().Truncate(time.Minute)})
		if err != nil {
			t.Fatalf("run fixture: %v", err)
		}
		return models.FormatID(run.ID)
	},
	"device_id": deviceFixture,
	"account_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string {
		dev, ok := parents["device_id"]
		if !ok {
			dev = deviceFixture(t, env, org, parents)
		}
		id, _ := models.ParseID("device_id", dev)
		accs, err := env.Store.Devices.Accounts(context.Background(), org.ID, id)
		if err != nil || len(accs) == 0 {
			t.Fatalf("account fixture: %v", err)
		}
		return models.FormatID(accs[0].ID)
	},
	"agent_type": func(*testing.T, *apitest.Env, *identity.Organization, map[string]string) string {
		return devices.AgentDevice
	},
	"action_id": func(*testing.T, *apitest.Env, *identity.Organization, map[string]string) string {
		return string(management.ActionDeleteUsers)
	},
	"upload_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		header, match, err := management.UploadHeader([]string{"Primary Email"})
		if err != nil {
			t.Fatal(err)
		}
		up := &management.MgmtUpload{OrgID: org.ID, Action: management.ActionDeleteUsers, FileName: "fixture.csv", Header: header, MatchColumns: match}
		if err := env.Store.Management.CreateUpload(context.Background(), up, []management.UploadRecord{{Fields: []string{"nobody@example.com"}}}); err != nil {
			t.Fatalf("upload fixture: %v", err)
		}
		return models.FormatID(up.ID)
	},
	"execution_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		u := &identity.User{OrgID: org.ID, Email: "target-" + models.FormatID(sqldb.NewID()) + "@example.com", Status: identity.UserActive}
		if err := env.Store.Users.Create(context.Background(), u, ""); err != nil {
			t.Fatalf("execution fixture: %v", err)
		}
		exec, _, err := env.Store.Management.CreateExecution(context.Background(), management.NewExecution{OrgID: org.ID,
			Action: management.ActionDeleteUsers, Selection: management.Selection{UserIDs: []int64{u.ID}}})
		if err != nil {
			t.Fatalf("execution fixture: %v", err)
		}
		return models.FormatID(exec.ID)
	},
	"device_group_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		g := &protection.DeviceGroup{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID())}
		if err := env.Store.DeviceGroups.Create(context.Background(), g, nil); err != nil {
			t.Fatalf("device group fixture: %v", err)
		}
		return models.FormatID(g.ID)
	},
	"hook_id": hookFixture,
	"delivery_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string {
		h, ok := parents["hook_id"]
		if !ok {
			h = hookFixture(t, env, org, parents)
		}
		hook, _ := models.ParseID("hook_id", h)
		d, err := env.Store.Hooks.Test(context.Background(), org.ID, hook)
		if err != nil {
			t.Fatalf("event hook delivery fixture: %v", err)
		}
		return models.FormatID(d.ID)
	},
	"token_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		tok, _, err := env.Store.ProvisioningTokens.Create(context.Background(), org.ID, "Fixture", nil)
		if err != nil {
			t.Fatalf("provisioning token fixture: %v", err)
		}
		return models.FormatID(tok.ID)
	},
	"authnfactor_config_id": smartCardFixture,
	"ca_config_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, parents map[string]string) string {
		factor, ok := parents["authnfactor_config_id"]
		if !ok {
			factor = smartCardFixture(t, env, org, parents)
		}
		factorID, _ := models.ParseID("authnfactor_config_id", factor)
		ca, err := env.Store.CAs.Create(context.Background(), org.ID, factorID, enrollment.CAInput{File: fixtureCA(t), MappingAttribute: ptr("email")})
		if err != nil {
			t.Fatalf("CA config fixture: %v", err)
		}
		return models.FormatID(ca.ID)
	},
	"template_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		tpl := &notification.Template{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID()), Module: "reports",
			Mail: &notification.MailTemplate{To: []string{"ops@example.com"}, Subject: "Hello", Content: "<p>Hi</p>", Severity: "high"}}
		if err := env.Store.Templates.Create(context.Background(), tpl, nil); err != nil {
			t.Fatalf("template fixture: %v", err)
		}
		return models.FormatID(tpl.ID)
	},
	// Condition configs and conditional access policies.
	"family": func(*testing.T, *apitest.Env, *identity.Organization, map[string]string) string {
		return string(protection.FamilyIPSources)
	},
	"config_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		c := &protection.ConditionConfig{OrgID: org.ID, Family: protection.FamilyIPSources, DisplayName: "Fixture " + models.FormatID(sqldb.NewID()), IPAddresses: "192.0.2.0/24"}
		if err := env.Store.ConditionConfigs.Create(context.Background(), c); err != nil {
			t.Fatalf("condition config fixture: %v", err)
		}
		return models.FormatID(c.ID)
	},
	"policy_id": func(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
		p := &protection.Policy{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID()), IsEnabled: true, AccessType: protection.AccessAllow,
			EndpointsSettings: []protection.EndpointSetting{{Endpoint: protection.EndpointNPS}}}
		if err := env.Store.Policies.Create(context.Background(), p, protection.PolicyActor{}); err != nil {
			t.Fatalf("policy fixture: %v", err)
		}
		return models.FormatID(p.ID)
	},
}

// deviceFixture registers a device with one local account.
func deviceFixture(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
	ctx := context.Background()
	key, err := env.Store.Devices.InstallKey(ctx, org.ID, devices.AgentDevice)
	if err != nil {
		t.Fatalf("device fixture: %v", err)
	}
	serial := "fixture-" + models.FormatID(sqldb.NewID())
	facts := devices.DeviceFacts{Name: serial, OSType: "Windows", JoinType: "ADJoined", SerialNumber: serial}
	dev, _, err := env.Store.Devices.Register(ctx, devices.Registration{InstallationKey: key, AgentType: devices.AgentDevice, Platform: "windows", Facts: facts})
	if err != nil {
		t.Fatalf("device fixture: %v", err)
	}
	in := devices.CheckIn{Facts: facts, Accounts: []devices.AccountReport{{UserName: "fixture", PermissionLevel: "Standard"}}}
	if _, err := env.Store.Devices.CheckIn(ctx, dev, &in); err != nil {
		t.Fatalf("device fixture: %v", err)
	}
	devicesByID[models.FormatID(dev.ID)] = dev
	return models.FormatID(dev.ID)
}

// devicesByID keeps the devices the device_id fixture made, for the
// fixtures of what lives on them.
var devicesByID = map[string]*devices.Device{}

// orgFree are path parameters that name no resource of an organization
// (an agent type, a management action): a route with only those has no other organization's id
// to refuse.
var orgFree = map[string]bool{"agent_type": true, "action_id": true, "family": true}

func orgScoped(path string) bool {
	for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
		if !orgFree[m[1]] {
			return true
		}
	}
	return false
}

// inputs give a valid query and body to routes that check them before their
// path ids, so that the id cases reach the id. Keyed by "METHOD path"; org is
// the caller's organization. Other routes get an empty JSON object as body
// when their method takes one.
var inputs = map[string]func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any){
	"POST /groups/:group_id/members": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return nil, map[string]any{"members": []string{fixtures["user_id"](t, env, org, nil)}}
	},
	"DELETE /groups/:group_id/members": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return url.Values{"ids": {fixtures["user_id"](t, env, org, nil)}}, nil
	},
	"DELETE /devices/:device_id/offline-enrolled-users": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return url.Values{"ids": {"1"}}, nil
	},
	"DELETE /management/actions/:action_id/uploads/:upload_id/data": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return url.Values{"ids": {"1"}}, nil
	},
	"POST /protection/device-groups/:device_group_id/members": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return nil, map[string]any{"device_ids": []string{}}
	},
	"DELETE /protection/device-groups/:device_group_id/members": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return url.Values{"ids": {"1"}}, nil
	},
	"GET /protection/agents-info/:agent_type/download": func(t *testing.T, env *apitest.Env, org *identity.Organization) (url.Values, any) {
		return url.Values{"platform": {"linux"}}, nil
	},
}

// request is a call of rt on path by the caller of org with token.
func request(t *testing.T, env *apitest.Env, rt api.Route, org *identity.Organization, path, token string) apitest.Request {
	req := apitest.Request{Method: rt.Method, Path: path, Token: token, Body: bodyFor(rt.Method)}
	if input, ok := inputs[rt.Method+" "+rt.Path]; ok {
		query, body := input(t, env, org)
		req.Body = body
		if len(query) > 0 {
			req.Path += "?" + query.Encode()
		}
	}
	return req
}

var pathParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// pathFor fills route's path parameters with fresh resources of org.
func pathFor(t *testing.T, env *apitest.Env, rt api.Route, org *identity.Organization) (string, bool) {
	t.Helper()
	ids := map[string]string{}
	missing := false
	path := pathParam.ReplaceAllStringFunc(rt.Path, func(m string) string {
		name := m[1:]
		make, ok := fixtures[name]
		if !ok {
			t.Errorf("%s %s: no fixture for path parameter %q: add one to fixtures in api/oauth/routes_test.go", rt.Method, rt.Path, name)
			missing = true
			return m
		}
		ids[name] = make(t, env, org, ids)
		return ids[name]
	})
	return "/api/v1" + path, !missing
}

// TestRoutes_Security runs every route of (*api.Server).Routes() with real
// tokens of the real authorization server: no token, a token in the query
// string, another scheme, an expired, a revoked and a wrong-scope token are
// refused (401, 401, 401, 401, 401, 403); each listed scope is let through;
// another organization's id answers 404; a list never shows another
// organization's rows.
func TestRoutes_Security(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newFixture(t, db, true, nil)
		// An expired token comes from a server whose tokens live a second;
		// it is made first so that the wait overlaps the setup.
		short := f.cfg
		short.AccessTokenLifespan = time.Second
		selfA, _ := f.client(f.env.Org, oauthstore.ClientSelf)
		allScopes := oauth.SupportedScopes()
		expired := f.issue(f.newServer(short), selfA, f.admin, false, allScopes...).AccessToken
		expiredAt := time.Now().Add(1600 * time.Millisecond)

		orgB := f.env.NewOrg("Other organization")
		adminB := f.newUser(orgB, "admin-b@example.com", identity.RoleAdmin)
		selfB, _ := f.client(orgB, oauthstore.ClientSelf)
		tokenB := f.issue(f.srv, selfB, adminB, false, allScopes...).AccessToken

		// One resource of every kind in the other organization, which no
		// list of this one may show.
		var hiddenIDs []string
		for name, make := range fixtures {
			if orgFree[name] {
				continue
			}
			hiddenIDs = append(hiddenIDs, make(t, f.env, orgB, map[string]string{}))
		}

		valid := f.issue(f.srv, selfA, f.admin, false, allScopes...).AccessToken
		revoked := f.issue(f.srv, selfA, f.admin, true, allScopes...)
		if r := f.tokenCall("/oauth/v2/token/revoke", nil, url.Values{"token": {revoked.RefreshToken}}); r.status != http.StatusOK {
			t.Fatalf("revoke: %d %s", r.status, r.body)
		}
		time.Sleep(time.Until(expiredAt))

		routes := f.env.Server.Routes()
		if len(routes) == 0 {
			t.Fatal("no routes")
		}
		for _, rt := range routes {
			t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
				path, ok := pathFor(t, f.env, rt, f.env.Org)
				if !ok {
					return
				}
				refused := []struct {
					name   string
					req    apitest.Request
					status int
				}{
					{"no token", apitest.Request{}, http.StatusUnauthorized},
					{"token in the query string", apitest.Request{Path: withQuery(path, "access_token", valid)}, http.StatusUnauthorized},
					{"token as the token parameter", apitest.Request{Path: withQuery(path, "token", valid)}, http.StatusUnauthorized},
					{"Bearer scheme", apitest.Request{Header: http.Header{"Authorization": {"Bearer " + valid}}}, http.StatusUnauthorized},
					{"lower-case scheme", apitest.Request{Header: http.Header{"Authorization": {"service-oauthtoken " + valid}}}, http.StatusUnauthorized},
					{"expired token", apitest.Request{Token: expired}, http.StatusUnauthorized},
					{"revoked token", apitest.Request{Token: revoked.AccessToken}, http.StatusUnauthorized},
					{"refresh token", apitest.Request{Token: revoked.RefreshToken}, http.StatusUnauthorized},
					{"wrong scope", apitest.Request{Token: f.issue(f.srv, selfA, f.admin, false, wrongScopes(t, rt.Scopes)...).AccessToken}, http.StatusForbidden},
				}
				for _, tc := range refused {
					req := tc.req
					req.Method = rt.Method
					if req.Path == "" {
						req.Path = path
					}
					resp := f.env.Do(req)
					if resp.Status != tc.status {
						t.Errorf("%s: %d %s, want %d", tc.name, resp.Status, resp.Body, tc.status)
						continue
					}
					wantCode := api.CodeUnauthorized
					if tc.status == http.StatusForbidden {
						wantCode = api.CodeAccessDenied
					}
					if e := resp.ErrorBody(t); e.Code != wantCode {
						t.Errorf("%s: error code %s, want %s", tc.name, e.Code, wantCode)
					}
				}

				for _, scope := range rt.Scopes {
					tok := f.issue(f.srv, selfA, f.admin, false, scope).AccessToken
					own, _ := pathFor(t, f.env, rt, f.env.Org)
					resp := f.env.Do(request(t, f.env, rt, f.env.Org, own, tok))
					switch resp.Status {
					case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
						t.Errorf("right scope %s: %d %s", scope, resp.Status, resp.Body)
					}
					if resp.Status >= 500 {
						t.Errorf("right scope %s: %d %s", scope, resp.Status, resp.Body)
					}
				}

				if orgScoped(rt.Path) {
					other, _ := pathFor(t, f.env, rt, orgB)
					resp := f.env.Do(request(t, f.env, rt, f.env.Org, other, valid))
					if resp.Status != http.StatusNotFound {
						t.Errorf("another organization's id: %d %s, want 404", resp.Status, resp.Body)
					}
					if resp := f.env.Do(request(t, f.env, rt, orgB, other, tokenB)); resp.Status == http.StatusNotFound {
						t.Errorf("the fixture's own organization cannot see it: 404 %s", resp.Body)
					}
				} else if rt.Method == http.MethodGet {
					resp := f.env.Do(apitest.Request{Method: rt.Method, Path: path, Token: valid})
					for _, id := range hiddenIDs {
						if strings.Contains(string(resp.Body), id) {
							t.Errorf("the list shows another organization's row %s", id)
						}
					}
				}
			})
		}
	})
}

// bodyFor is the body sent with a method that takes one: an empty JSON
// object, so that a handler which reads its body before the id still gets
// as far as the id.
func bodyFor(method string) any {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		return map[string]any{}
	}
	return nil
}

func withQuery(path, key, value string) string {
	return path + "?" + url.Values{key: {value}}.Encode()
}

// wrongScopes returns every known scope that does not satisfy required.
func wrongScopes(t *testing.T, required []string) []string {
	t.Helper()
	var out []string
	for _, s := range oauth.SupportedScopes() {
		if !auth.Allows([]string{s}, required) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatalf("every scope satisfies %v", required)
	}
	return out
}

// scheduleFixture makes a notification schedule of org (and its group and
// template), written without its Temporal Schedule.
func scheduleFixture(t *testing.T, env *apitest.Env, org *identity.Organization) string {
	ctx := context.Background()
	g := &identity.Group{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID())}
	if err := env.Store.Groups.Create(ctx, g, nil, nil); err != nil {
		t.Fatalf("schedule fixture: %v", err)
	}
	tpl := &notification.Template{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID()), Module: "reports",
		Mail: &notification.MailTemplate{Subject: "Hello", Content: "<p>Hi</p>"}}
	if err := env.Store.Templates.Create(ctx, tpl, nil); err != nil {
		t.Fatalf("schedule fixture: %v", err)
	}
	// Written without its Temporal Schedule (paused): the API makes that
	// when it first needs it.
	sc := &notification.NotificationSchedule{OrgID: org.ID, Name: "Fixture " + models.FormatID(sqldb.NewID()), TemplateID: tpl.ID,
		GroupIDs: []int64{g.ID}, Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "0"}}
	noSync := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
		return nil
	}
	if err := env.Store.Notifications.CreateSchedule(ctx, sc, 0, noSync); err != nil {
		t.Fatalf("schedule fixture: %v", err)
	}
	return models.FormatID(sc.ID)
}

// smartCardFixture is the organization's smart card factor config.
func smartCardFixture(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
	configs, err := env.Store.Factors.List(context.Background(), org.ID)
	if err != nil {
		t.Fatalf("factor config fixture: %v", err)
	}
	for _, c := range configs {
		if c.Type == enrollment.FactorSmartCard {
			return models.FormatID(c.ID)
		}
	}
	t.Fatal("factor config fixture: no smart card config")
	return ""
}

// fixtureCA makes a fresh self-signed CA certificate (DER).
func fixtureCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(sqldb.NewID()), Subject: pkix.Name{CommonName: "Fixture CA " + models.FormatID(sqldb.NewID())},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func ptr[T any](v T) *T { return &v }

// hookFixture makes a disabled event hook of org (nothing is sent).
func hookFixture(t *testing.T, env *apitest.Env, org *identity.Organization, _ map[string]string) string {
	h := &hooks.Hook{OrgID: org.ID, URL: "https://hooks.example.com/fixture", EventTypes: []string{"user.*"}}
	if _, err := env.Store.Hooks.Create(context.Background(), h); err != nil {
		t.Fatalf("event hook fixture: %v", err)
	}
	return models.FormatID(h.ID)
}
