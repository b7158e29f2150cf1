package oauth

import (
	"iam/api/auth"
	"slices"
	"strings"
)

// resources are the scope resources in use (spec 5, rule 5), with the words
// the consent page shows for them.
var resources = map[string]string{
	"user":                      "users",
	"group":                     "groups",
	"device":                    "devices, their local accounts and account linking",
	"job":                       "jobs",
	"management":                "management actions on users",
	"quick_enrollment":          "quick enrollment",
	"conditional_access_policy": "conditional access policies, administrator settings and agents",
	"conditional_factor_config": "condition configurations",
	"notification_template":     "notification templates",
	"meta":                      "template metadata",
	"auth":                      "authentication factor configurations",
	"audit":                     "the audit log and its signed digests",
	"event_hook":                "event hooks and their deliveries",
	"scim":                      "users and groups through SCIM provisioning (/scim/v2)",
	"provisioning_token":        "SCIM provisioning tokens",
}

// operations are the scope operations, with the consent page's words.
var operations = []struct{ name, verb string }{
	{"READ", "Read"},
	{"CREATE", "Create"},
	{"UPDATE", "Update"},
	{"DELETE", "Delete"},
	{"WRITE", "Change"},
	{"ALL", "Fully manage"},
}

// offlineScope is granted beside the requested scopes when the request says
// access_type=offline; a token request whose code carries it gets a refresh
// token. It never reaches a client or a principal.
const offlineScope = "offline_access"

// knownScope reports whether s is svc.<resource>.<OPERATION> with a resource
// in use; the operation word's case does not matter (api/auth/scopes.go).
func knownScope(s string) bool {
	if !auth.ValidScope(s) {
		return false
	}
	_, ok := resources[scopeResource(s)]
	return ok
}

func scopeResource(s string) string {
	rest := strings.TrimPrefix(s, "svc.")
	if i := strings.LastIndexByte(rest, '.'); i > 0 {
		return rest[:i]
	}
	return rest
}

// describeScope says in words what a known scope allows.
func describeScope(s string) string {
	op := s[strings.LastIndexByte(s, '.')+1:]
	for _, o := range operations {
		if strings.EqualFold(o.name, op) {
			return o.verb + " " + resources[scopeResource(s)]
		}
	}
	return s
}

// scopeStrategy is fosite's scope check. A client with registered scopes
// (a service client) may ask for a known scope one of them allows
// (auth.Allows: svc.scim.ALL allows svc.scim.READ), and for nothing else.
// Any other client registers none and may ask for any known scope (what is
// granted depends on the user), and for offlineScope.
func scopeStrategy(registered []string, scope string) bool {
	if len(registered) > 0 {
		return knownScope(scope) && auth.Allows(registered, []string{scope})
	}
	return scope == offlineScope || knownScope(scope)
}

// ParseScopes splits a scope parameter: comma-separated as the interface
// writes it, space-separated as RFC 6749 does, or both. Duplicates and
// empty items are dropped; the order is kept.
func ParseScopes(raw string) []string {
	fields := strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// withoutOffline returns scopes without offlineScope.
func withoutOffline(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if s != offlineScope {
			out = append(out, s)
		}
	}
	return out
}

// SupportedScopes lists every scope a client may ask for, in a stable order.
func SupportedScopes() []string {
	names := make([]string, 0, len(resources))
	for r := range resources {
		names = append(names, r)
	}
	slices.Sort(names)
	out := make([]string, 0, len(names)*len(operations))
	for _, r := range names {
		for _, o := range operations {
			out = append(out, "svc."+r+"."+o.name)
		}
	}
	return out
}
