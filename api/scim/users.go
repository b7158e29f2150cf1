package scim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/identity"
	mscim "iam/models/scim"
)

// userVersion is a user's ETag: its last change.
func userVersion(u *identity.User) string {
	return `W/"` + strconv.FormatInt(u.UpdatedAt.UnixNano(), 36) + `"`
}

// location is the URL of a resource, under the request's host.
func location(c *gin.Context, kind string, id int64) string {
	return resourceBase(c) + kind + "/" + models.FormatID(id)
}

// resourceBase is the URL every resource's location starts with (then its
// kind, a slash and its id), under the request's host.
func resourceBase(c *gin.Context) string {
	scheme := "http"
	if c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host + Prefix + "/"
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// userDoc is the SCIM User of u (docs/scim.md has the mapping); groups
// (nil: left out) are its groups, read-only.
func userDoc(c *gin.Context, u *identity.User, groups []mscim.GroupRef) doc {
	d := doc{
		"schemas":     []any{mscim.UserSchema, mscim.EnterpriseSchema},
		"id":          models.FormatID(u.ID),
		"userName":    u.UserName,
		"displayName": u.DisplayName,
		"active":      u.Status == identity.UserActive,
		"name": doc{"givenName": u.FirstName, "familyName": u.LastName,
			"formatted": strings.TrimSpace(u.FirstName + " " + u.LastName)},
		"emails": []any{doc{"value": u.Email, "type": "work", "primary": true}},
	}
	if u.ExternalID != "" {
		d["externalId"] = u.ExternalID
	}
	if u.Title != "" {
		d["title"] = u.Title
	}
	if u.Language != "" {
		d["preferredLanguage"] = u.Language
		d["locale"] = u.Language
	}
	var phones []any
	for _, p := range []struct{ typ, v string }{{"mobile", u.MobileNumber}, {"work", u.TelephoneNumber}, {"home", u.HomePhone}, {"fax", u.Fax}} {
		if p.v != "" {
			phones = append(phones, doc{"value": p.v, "type": p.typ})
		}
	}
	if len(phones) > 0 {
		d["phoneNumbers"] = phones
	}
	if u.Street+u.City+u.StateProvince+u.ZipPostal+u.Country != "" {
		a := doc{"type": "work", "primary": true}
		for k, v := range map[string]string{"streetAddress": u.Street, "locality": u.City, "region": u.StateProvince, "postalCode": u.ZipPostal, "country": u.Country} {
			if v != "" {
				a[k] = v
			}
		}
		d["addresses"] = []any{a}
	}
	ext := doc{}
	for k, v := range map[string]string{"employeeNumber": u.EmployeeID, "department": u.Department, "organization": u.Company} {
		if v != "" {
			ext[k] = v
		}
	}
	if u.ManagerID != nil {
		ext["manager"] = doc{"value": models.FormatID(*u.ManagerID)}
		if c != nil {
			ext["manager"].(doc)["$ref"] = location(c, "Users", *u.ManagerID)
		}
	}
	if len(ext) > 0 {
		d[mscim.EnterpriseSchema] = ext
	}
	if groups != nil {
		list := make([]any, 0, len(groups))
		for _, g := range groups {
			e := doc{"value": models.FormatID(g.ID), "display": g.Name, "type": "direct"}
			if c != nil {
				e["$ref"] = location(c, "Groups", g.ID)
			}
			list = append(list, e)
		}
		d["groups"] = list
	}
	if c != nil {
		d["meta"] = doc{"resourceType": "User", "created": rfc3339(u.CreatedAt), "lastModified": rfc3339(u.UpdatedAt),
			"location": location(c, "Users", u.ID), "version": userVersion(u)}
	}
	return d
}

// applyUserDoc sets u's fields from the SCIM User d, as a PUT does: every
// attribute d leaves out is cleared, but the email (kept, or taken from a
// userName that is an address) and the status (kept). Read-only attributes
// (id, groups, meta) and the password (its own path) are ignored.
func applyUserDoc(u *identity.User, d doc) error {
	var err error
	str := func(name string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = getString(d, name)
		return s
	}
	u.UserName = strings.TrimSpace(str("userName"))
	if err == nil && u.UserName == "" {
		return invalidValue("userName is required")
	}
	u.ExternalID = str("externalId")
	u.DisplayName = str("displayName")
	u.Title = str("title")
	u.Language = str("preferredLanguage")
	if u.Language == "" {
		u.Language = str("locale")
	}
	if err != nil {
		return err
	}
	name, err := getObject(d, "name")
	if err != nil {
		return err
	}
	u.FirstName, u.LastName = "", ""
	if name != nil {
		if u.FirstName, err = getString(name, "givenName"); err != nil {
			return err
		}
		if u.LastName, err = getString(name, "familyName"); err != nil {
			return err
		}
	}
	if v, ok := get(d, "active"); ok && v != nil {
		b, ok := boolOf(v)
		if !ok {
			return invalidValue("active must be true or false")
		}
		u.Status = identity.UserInactive
		if b {
			u.Status = identity.UserActive
		}
	}
	emails, err := getList(d, "emails")
	if err != nil {
		return err
	}
	if e := pick(emails, "work"); e != nil {
		v, err := getString(e, "value")
		if err != nil {
			return err
		}
		if v != "" {
			u.Email = v
		}
	}
	if u.Email == "" && strings.Contains(u.UserName, "@") {
		u.Email = u.UserName
	}
	if u.Email == "" {
		return invalidValue("emails: the user needs an email address (or a userName that is one)")
	}
	if err := applyPhones(u, d); err != nil {
		return err
	}
	if err := applyAddress(u, d); err != nil {
		return err
	}
	return applyEnterprise(u, d)
}

func applyPhones(u *identity.User, d doc) error {
	phones, err := getList(d, "phoneNumbers")
	if err != nil {
		return err
	}
	u.MobileNumber, u.TelephoneNumber, u.HomePhone, u.Fax = "", "", "", ""
	for _, p := range phones {
		v, err := getString(p, "value")
		if err != nil {
			return err
		}
		t, _ := getString(p, "type")
		switch strings.ToLower(t) {
		case "mobile":
			u.MobileNumber = v
		case "home":
			u.HomePhone = v
		case "fax":
			u.Fax = v
		default:
			if u.TelephoneNumber == "" || strings.EqualFold(t, "work") {
				u.TelephoneNumber = v
			}
		}
	}
	return nil
}

func applyAddress(u *identity.User, d doc) error {
	addrs, err := getList(d, "addresses")
	if err != nil {
		return err
	}
	a := pick(addrs, "work")
	if a == nil {
		a = doc{}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"streetAddress", &u.Street}, {"locality", &u.City}, {"region", &u.StateProvince}, {"postalCode", &u.ZipPostal}, {"country", &u.Country}} {
		if *f.dst, err = getString(a, f.name); err != nil {
			return err
		}
	}
	return nil
}

func applyEnterprise(u *identity.User, d doc) error {
	ext := extensionOf(d, false)
	if ext == nil {
		ext = doc{}
	}
	var err error
	if u.EmployeeID, err = getString(ext, "employeeNumber"); err != nil {
		return err
	}
	if u.Department, err = getString(ext, "department"); err != nil {
		return err
	}
	if u.Company, err = getString(ext, "organization"); err != nil {
		return err
	}
	u.ManagerID = nil
	m, ok := get(ext, "manager")
	if !ok || m == nil {
		return nil
	}
	var ref string
	switch m := m.(type) {
	case string: // Entra sends the manager's id as a string
		ref = m
	case doc:
		if ref, err = getString(m, "value"); err != nil {
			return err
		}
	default:
		return invalidValue("manager must be an id or an object with a value")
	}
	if ref = strings.TrimSpace(ref); ref == "" {
		return nil
	}
	id, perr := strconv.ParseInt(ref, 10, 64)
	if perr != nil || id <= 0 {
		return invalidValue("manager must be the id of a user of the organization")
	}
	u.ManagerID = &id
	return nil
}

// checkVersion compares the If-Match header with version: 412 when it
// names another version.
func checkVersion(c *gin.Context, version string) error {
	im := strings.TrimSpace(c.GetHeader("If-Match"))
	if im == "" || im == "*" {
		return nil
	}
	for _, v := range strings.Split(im, ",") {
		v = strings.TrimSpace(v)
		if v == version || "W/"+v == version || v == strings.TrimPrefix(version, "W/") {
			return nil
		}
	}
	return errPreconditionFailed
}

// parseID reads a resource id of the path: a digit string; any other id
// names no resource (404).
func parseID(c *gin.Context, notFound error) (int64, error) {
	id, err := models.ParseID("id", c.Param("id"))
	if err != nil {
		return 0, notFound
	}
	return id, nil
}

// writeUser answers the user (with its groups unless projected out).
func (s *Server) writeUser(c *gin.Context, status int, u *identity.User) error {
	proj, err := projectionOf(c.Query("attributes"), c.Query("excludedAttributes"))
	if err != nil {
		return err
	}
	var groups []mscim.GroupRef
	if proj.wants("groups") {
		byUser, err := s.store.SCIM.UserGroups(c.Request.Context(), u.OrgID, []int64{u.ID})
		if err != nil {
			return err
		}
		groups = byUser[u.ID]
		if groups == nil {
			groups = []mscim.GroupRef{}
		}
	}
	c.Header("ETag", userVersion(u))
	if status == http.StatusCreated {
		c.Header("Location", location(c, "Users", u.ID))
	}
	if proj.empty() {
		writeBody(c, status, appendUserJSON(make([]byte, 0, 1024), resourceBase(c), u, groups))
		return nil
	}
	writeJSON(c, status, proj.apply(userDoc(c, u, groups)))
	return nil
}

// GetUser serves GET /Users/{id}.
func (s *Server) GetUser(c *gin.Context) error {
	id, err := parseID(c, identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	u, err := s.store.Users.Get(c.Request.Context(), orgOf(c), id)
	if err != nil {
		return err
	}
	if inm := c.GetHeader("If-None-Match"); inm != "" && inm == userVersion(u) {
		c.Status(http.StatusNotModified)
		return nil
	}
	return s.writeUser(c, http.StatusOK, u)
}

// CreateUser serves POST /Users. 409 uniqueness for a taken userName, email or
// employeeNumber.
func (s *Server) CreateUser(c *gin.Context) error {
	var d doc
	if err := decode(c, &d); err != nil {
		return err
	}
	u := &identity.User{OrgID: orgOf(c), Status: identity.UserActive}
	if err := applyUserDoc(u, d); err != nil {
		return err
	}
	password, err := getString(d, "password")
	if err != nil {
		return err
	}
	if err := s.store.Users.Create(c.Request.Context(), u, password); err != nil {
		return err
	}
	return s.writeUser(c, http.StatusCreated, u)
}

// ReplaceUser serves PUT /Users/{id} (Okta sends the whole user).
func (s *Server) ReplaceUser(c *gin.Context) error {
	id, err := parseID(c, identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	var d doc
	if err = decode(c, &d); err != nil {
		return err
	}
	var password *string
	if v, ok := get(d, "password"); ok && v != nil {
		pw, perr := getString(d, "password")
		if perr != nil {
			return perr
		}
		password = &pw
	}
	u, err := s.store.Users.Update(c.Request.Context(), orgOf(c), id, func(u *identity.User) error {
		if verr := checkVersion(c, userVersion(u)); verr != nil {
			return verr
		}
		return applyUserDoc(u, d)
	}, password)
	if err != nil {
		return err
	}
	return s.writeUser(c, http.StatusOK, u)
}

// PatchUser serves PATCH /Users/{id} (RFC 7644 §3.5.2, with what Entra and Okta
// send: op names in any case, booleans as strings, path-less replace of
// nested objects, the manager as a string).
func (s *Server) PatchUser(c *gin.Context) error {
	id, err := parseID(c, identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	ops, err := decodePatch(c)
	if err != nil {
		return err
	}
	password, err := passwordOf(ops)
	if err != nil {
		return err
	}
	u, err := s.store.Users.Update(c.Request.Context(), orgOf(c), id, func(u *identity.User) error {
		if verr := checkVersion(c, userVersion(u)); verr != nil {
			return verr
		}
		d := userDoc(nil, u, nil)
		if perr := applyPatch(d, ops, userPatchRules); perr != nil {
			return perr
		}
		return applyUserDoc(u, d)
	}, password)
	if err != nil {
		return err
	}
	return s.writeUser(c, http.StatusOK, u)
}

// DeleteUser serves DELETE /Users/{id}.
func (s *Server) DeleteUser(c *gin.Context) error {
	id, err := parseID(c, identity.ErrUserNotFound)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if c.GetHeader("If-Match") != "" {
		// Checked on the row the delete locks: no write slips in between.
		err = s.store.Users.DeleteIf(ctx, orgOf(c), id, func(u *identity.User) error { return checkVersion(c, userVersion(u)) })
	} else {
		err = s.store.Users.Delete(ctx, orgOf(c), id)
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// ListUsers serves GET /Users.
func (s *Server) ListUsers(c *gin.Context) error {
	q, err := searchOfQuery(c)
	if err != nil {
		return err
	}
	return s.listUsers(c, q)
}

// SearchUsers serves POST /Users/.search.
func (s *Server) SearchUsers(c *gin.Context) error {
	q, err := searchOfBody(c)
	if err != nil {
		return err
	}
	return s.listUsers(c, q)
}

func (s *Server) listUsers(c *gin.Context, q search) error {
	ctx := c.Request.Context()
	org := orgOf(c)
	users, groups, total, err := s.store.SCIM.ListUsers(ctx, org, q.query, q.proj.wants("groups"))
	if err != nil {
		return err
	}
	if q.proj.empty() {
		writeBody(c, http.StatusOK,
			appendUserListJSON(make([]byte, 0, 1024*(len(users)+1)), resourceBase(c), total, q.query.StartIndex, users, groups))
		return nil
	}
	resources := make([]any, len(users))
	for i := range users {
		var g []mscim.GroupRef
		if groups != nil {
			g = groups[users[i].ID]
			if g == nil {
				g = []mscim.GroupRef{}
			}
		}
		resources[i] = q.proj.apply(userDoc(c, &users[i], g))
	}
	writeJSON(c, http.StatusOK, listResponse(total, q.query.StartIndex, resources))
	return nil
}

// passwordOf returns the password a PATCH sets (nil when none; "" when it
// removes it) from its operations on "password".
func passwordOf(ops []patchOp) (*string, error) {
	var out *string
	for _, op := range ops {
		if strings.EqualFold(strings.TrimSpace(op.Path), "password") {
			pw := ""
			if !strings.EqualFold(op.Op, "remove") {
				if err := json.Unmarshal(op.Value, &pw); err != nil {
					return nil, invalidValue("password must be a string")
				}
			}
			out = &pw
			continue
		}
		if op.Path == "" && len(op.Value) > 0 {
			var m doc
			if json.Unmarshal(op.Value, &m) == nil {
				if v, ok := get(m, "password"); ok {
					pw, ok := v.(string)
					if !ok {
						return nil, invalidValue("password must be a string")
					}
					out = &pw
				}
			}
		}
	}
	return out, nil
}
