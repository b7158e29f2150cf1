package scim_test

import (
	"testing"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/dbtest"
	"iam/models/modeltest"
)

// scimWrite is how TestSCIM_EveryWriteRecordsItsEvent drives one write
// route of SCIMRoutes: the request (its :id made by prepare) and the event
// it must record, its actor the provisioning token.
type scimWrite struct {
	event   string
	prepare func(c *scimClient) string // the :id, when the route has one
	body    obj
}

var scimWrites = map[string]scimWrite{
	"POST /Users":        {event: audit.UserCreated, body: obj{"userName": "walk@example.com"}},
	"PUT /Users/:id":     {event: audit.UserUpdated, prepare: func(c *scimClient) string { return c.do("POST", "/Users", obj{"userName": "put@example.com"}).id() }, body: obj{"userName": "put@example.com", "title": "T"}},
	"PATCH /Users/:id":   {event: audit.UserUpdated, prepare: func(c *scimClient) string { return c.do("POST", "/Users", obj{"userName": "patch@example.com"}).id() }, body: patch(obj{"op": "replace", "path": "title", "value": "T"})},
	"DELETE /Users/:id":  {event: audit.UserDeleted, prepare: func(c *scimClient) string { return c.do("POST", "/Users", obj{"userName": "del@example.com"}).id() }},
	"POST /Groups":       {event: audit.GroupCreated, body: obj{"displayName": "Walk"}},
	"PUT /Groups/:id":    {event: audit.GroupUpdated, prepare: func(c *scimClient) string { return c.do("POST", "/Groups", obj{"displayName": "Put"}).id() }, body: obj{"displayName": "Put 2"}},
	"PATCH /Groups/:id":  {event: audit.GroupUpdated, prepare: func(c *scimClient) string { return c.do("POST", "/Groups", obj{"displayName": "Patch"}).id() }, body: patch(obj{"op": "replace", "path": "displayName", "value": "Patch 2"})},
	"DELETE /Groups/:id": {event: audit.GroupDeleted, prepare: func(c *scimClient) string { return c.do("POST", "/Groups", obj{"displayName": "Del"}).id() }},
}

// TestSCIM_EveryWriteRecordsItsEvent walks the write routes of
// SCIMRoutes: each records its event in its transaction, the provisioning
// token (a client) its actor, the request's client and id with it. A new
// write route without its entry here fails the test.
func TestSCIM_EveryWriteRecordsItsEvent(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env, c := newEnv(t, db)
		for _, rt := range env.Server.SCIMRoutes() {
			if !rt.Write {
				continue
			}
			name := rt.Method + " " + rt.Path
			w, ok := scimWrites[name]
			if !ok {
				t.Errorf("%s writes, and scimWrites has no entry for it", name)
				continue
			}
			path := rt.Path
			if w.prepare != nil {
				path = path[:len(path)-len(":id")] + w.prepare(c)
			}
			before := len(modeltest.EventsOfType(t, db, env.Org.ID, w.event))
			var body any
			if w.body != nil {
				body = w.body
			}
			r := c.do(rt.Method, path, body)
			if r.status >= 300 {
				t.Fatalf("%s: %d %s", name, r.status, r.raw)
			}
			evs := modeltest.EventsOfType(t, db, env.Org.ID, w.event)
			if len(evs) != before+1 {
				t.Fatalf("%s: %d %s events, want %d", name, len(evs), w.event, before+1)
			}
			ev := evs[len(evs)-1]
			if ev.Actor.Type != models.ActorClient || ev.Actor.DisplayName != "Provisioning" || ev.RequestID == "" || ev.Client.IPAddress == "" {
				t.Fatalf("%s: event %+v", name, ev)
			}
		}
	})
}
