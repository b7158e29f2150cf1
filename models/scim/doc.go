// Package scim is the SCIM 2.0 area (RFC 7643, RFC 7644; docs/scim.md):
// the filter language of /scim/v2 with its value paths and URN attribute
// names, translated through an allow-list of attributes into bound SQL
// parameters only; the SCIM reads over the identity area's users and
// groups (lists with filter, sort and 1-based paging; members and groups
// of a resource); and the organizations' provisioning tokens, stored as
// their SHA-256 only. Writes to users and groups go through the identity
// area's store methods, so that dynamic groups are recomputed and audit
// events recorded exactly as for /api/v1.
package scim
