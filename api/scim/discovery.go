package scim

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	mscim "iam/models/scim"
)

// The discovery schemas' URNs (RFC 7643 §5-7).
const (
	ServiceProviderConfigSchema = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
	ResourceTypeSchema          = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
	SchemaSchema                = "urn:ietf:params:scim:schemas:core:2.0:Schema"
)

func baseURL(c *gin.Context) string {
	return strings.TrimSuffix(location(c, "", 0), "/0")
}

// ServiceProviderConfig serves GET /ServiceProviderConfig. It tells what this
// service supports: PATCH, filters (at most MaxCount results a page),
// sorting, ETags and password changes; no bulk.
func (s *Server) ServiceProviderConfig(c *gin.Context) error {
	writeJSON(c, http.StatusOK, doc{
		"schemas":        []any{ServiceProviderConfigSchema},
		"patch":          doc{"supported": true},
		"bulk":           doc{"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
		"filter":         doc{"supported": true, "maxResults": mscim.MaxCount},
		"changePassword": doc{"supported": true},
		"sort":           doc{"supported": true},
		"etag":           doc{"supported": true},
		"authenticationSchemes": []any{doc{
			"type": "oauthbearertoken", "name": "OAuth Bearer Token", "primary": true,
			"description": "A provisioning token of the organization (POST /api/v1/provisioning-tokens), or an OAuth 2.0 access token holding a svc.scim scope, as Authorization: Bearer <token>.",
		}},
		"meta": doc{"resourceType": "ServiceProviderConfig", "location": baseURL(c) + "/ServiceProviderConfig"},
	})
	return nil
}

func resourceTypes(c *gin.Context) []doc {
	base := baseURL(c)
	return []doc{
		{"schemas": []any{ResourceTypeSchema}, "id": "User", "name": "User", "endpoint": "/Users",
			"description": "User Account", "schema": mscim.UserSchema,
			"schemaExtensions": []any{doc{"schema": mscim.EnterpriseSchema, "required": false}},
			"meta":             doc{"resourceType": "ResourceType", "location": base + "/ResourceTypes/User"}},
		{"schemas": []any{ResourceTypeSchema}, "id": "Group", "name": "Group", "endpoint": "/Groups",
			"description": "Group", "schema": mscim.GroupSchema,
			"meta": doc{"resourceType": "ResourceType", "location": base + "/ResourceTypes/Group"}},
	}
}

// ResourceTypes serves GET /ResourceTypes.
func (s *Server) ResourceTypes(c *gin.Context) error {
	types := resourceTypes(c)
	list := make([]any, len(types))
	for i := range types {
		list[i] = types[i]
	}
	writeJSON(c, http.StatusOK, listResponse(len(list), 1, list))
	return nil
}

// ResourceType serves GET /ResourceTypes/{name}.
func (s *Server) ResourceType(c *gin.Context) error {
	for _, t := range resourceTypes(c) {
		if strings.EqualFold(t["id"].(string), c.Param("id")) {
			writeJSON(c, http.StatusOK, t)
			return nil
		}
	}
	return newError(http.StatusNotFound, "", "no resource type "+c.Param("id"))
}

// attr describes an attribute (RFC 7643 §7).
func attr(name, typ string, multi bool, mutability, returned, uniqueness string, caseExact bool, subs ...doc) doc {
	a := doc{"name": name, "type": typ, "multiValued": multi, "required": false, "caseExact": caseExact,
		"mutability": mutability, "returned": returned, "uniqueness": uniqueness, "description": name}
	if len(subs) > 0 {
		list := make([]any, len(subs))
		for i := range subs {
			list[i] = subs[i]
		}
		a["subAttributes"] = list
	}
	return a
}

func str(name string) doc { return attr(name, "string", false, "readWrite", "default", "none", false) }

func multiValue(name string, types ...string) doc {
	t := str("type")
	if len(types) > 0 {
		cv := make([]any, len(types))
		for i := range types {
			cv[i] = types[i]
		}
		t["canonicalValues"] = cv
	}
	return attr(name, "complex", true, "readWrite", "default", "none", false,
		str("value"), t, attr("primary", "boolean", false, "readWrite", "default", "none", false))
}

func schemas(c *gin.Context) []doc {
	base := baseURL(c)
	userName := attr("userName", "string", false, "readWrite", "default", "server", false)
	userName["required"] = true
	displayName := str("displayName")
	groupName := attr("displayName", "string", false, "readWrite", "default", "server", false)
	groupName["required"] = true
	password := attr("password", "string", false, "writeOnly", "never", "none", false)
	ref := func(name string) doc {
		r := attr(name, "reference", false, "readOnly", "default", "none", false)
		r["referenceTypes"] = []any{"User", "Group"}
		return r
	}
	user := doc{"schemas": []any{SchemaSchema}, "id": mscim.UserSchema, "name": "User", "description": "User Account",
		"attributes": []any{
			userName,
			attr("externalId", "string", false, "readWrite", "default", "none", true),
			attr("name", "complex", false, "readWrite", "default", "none", false,
				str("formatted"), str("familyName"), str("givenName")),
			displayName, str("title"), str("preferredLanguage"), str("locale"),
			attr("active", "boolean", false, "readWrite", "default", "none", false),
			password,
			multiValue("emails", "work"),
			multiValue("phoneNumbers", "mobile", "work", "home", "fax"),
			attr("addresses", "complex", true, "readWrite", "default", "none", false,
				str("streetAddress"), str("locality"), str("region"), str("postalCode"), str("country"), str("type"),
				attr("primary", "boolean", false, "readWrite", "default", "none", false)),
			attr("groups", "complex", true, "readOnly", "default", "none", false,
				attr("value", "string", false, "readOnly", "default", "none", false), ref("$ref"),
				attr("display", "string", false, "readOnly", "default", "none", false),
				attr("type", "string", false, "readOnly", "default", "none", false)),
		},
		"meta": doc{"resourceType": "Schema", "location": base + "/Schemas/" + mscim.UserSchema}}
	manager := attr("manager", "complex", false, "readWrite", "default", "none", false,
		str("value"), ref("$ref"), attr("displayName", "string", false, "readOnly", "default", "none", false))
	enterprise := doc{"schemas": []any{SchemaSchema}, "id": mscim.EnterpriseSchema, "name": "EnterpriseUser",
		"description": "Enterprise User",
		"attributes":  []any{str("employeeNumber"), str("organization"), str("department"), manager},
		"meta":        doc{"resourceType": "Schema", "location": base + "/Schemas/" + mscim.EnterpriseSchema}}
	member := attr("members", "complex", true, "readWrite", "default", "none", false,
		attr("value", "string", false, "immutable", "default", "none", false), ref("$ref"),
		attr("display", "string", false, "readOnly", "default", "none", false),
		attr("type", "string", false, "immutable", "default", "none", false))
	group := doc{"schemas": []any{SchemaSchema}, "id": mscim.GroupSchema, "name": "Group", "description": "Group",
		"attributes": []any{groupName, attr("externalId", "string", false, "readWrite", "default", "none", true), member},
		"meta":       doc{"resourceType": "Schema", "location": base + "/Schemas/" + mscim.GroupSchema}}
	return []doc{user, enterprise, group}
}

// Schemas serves GET /Schemas.
func (s *Server) Schemas(c *gin.Context) error {
	all := schemas(c)
	list := make([]any, len(all))
	for i := range all {
		list[i] = all[i]
	}
	writeJSON(c, http.StatusOK, listResponse(len(list), 1, list))
	return nil
}

// Schema serves GET /Schemas/{urn}.
func (s *Server) Schema(c *gin.Context) error {
	for _, sc := range schemas(c) {
		if strings.EqualFold(sc["id"].(string), c.Param("id")) {
			writeJSON(c, http.StatusOK, sc)
			return nil
		}
	}
	return newError(http.StatusNotFound, "", "no schema "+c.Param("id"))
}

// Handle adapts a handler of this package (func(*gin.Context) error) to
// gin, answering its error in SCIM's shape.
func (s *Server) Handle(h func(*gin.Context) error) gin.HandlerFunc { return s.handle(h) }
