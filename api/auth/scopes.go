package auth

import "strings"

// Scopes have the form svc.<resource>.<OPERATION> (spec 5, rule 5). The
// decisions the interface leaves open (DESIGN.md):
//   - the operation word is compared case-insensitively, prefix and resource
//     exactly (the interface writes svc.job.READ and svc.device.write alike);
//   - a route accepts any one of its listed scopes;
//   - ALL covers every operation of its resource.

// Scopes returns the scopes svc.<resource>.<op> for each op.
func Scopes(resource string, ops ...string) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = "svc." + resource + "." + op
	}
	return out
}

// Allows reports whether granted holds a scope that satisfies any of required.
func Allows(granted, required []string) bool {
	for _, g := range granted {
		gRes, gOp, ok := splitScope(g)
		if !ok {
			continue
		}
		for _, r := range required {
			rRes, rOp, ok := splitScope(r)
			if ok && gRes == rRes && (strings.EqualFold(gOp, rOp) || strings.EqualFold(gOp, "ALL")) {
				return true
			}
		}
	}
	return false
}

// splitScope splits "svc.<resource>.<op>" into resource and op.
func splitScope(s string) (resource, op string, ok bool) {
	rest, found := strings.CutPrefix(s, "svc.")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// ValidScope reports whether s has the form svc.<resource>.<OPERATION> with a
// known operation.
func ValidScope(s string) bool {
	_, op, ok := splitScope(s)
	if !ok {
		return false
	}
	switch strings.ToUpper(op) {
	case "READ", "CREATE", "UPDATE", "DELETE", "WRITE", "ALL":
		return true
	}
	return false
}
