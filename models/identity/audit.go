package identity

import (
	"context"
	"reflect"
	"strings"
	"sync"

	"iam/models"
	"iam/models/audit"
)

// The audit events of the identity area are recorded with their changes
// (models.Record inside the store method's sqldb.InTx): org.created,
// user.created, user.updated (with the fields it changed, by their API
// names), user.password_changed (that the password changed, never what it
// is), user.deleted, group.created, group.updated, group.deleted,
// group.members_added and group.members_removed. A bulk change writes one
// event with a target per entity, split into events of at most
// MaxEventTargets targets. Memberships a dynamic group's rule computes
// are the recompute job's work and write no event of their own.

// Target types of the identity area's events.
const (
	OrgTargetType   = "organization"
	UserTargetType  = "user"
	GroupTargetType = "group"
)

// MaxEventTargets caps the targets of one audit event. A bulk change of
// more entities writes several events of the same type, each repeating its
// main target (the group of a membership change) first.
const MaxEventTargets = 1000

// recordChunked records events of type typ in the organization naming
// targets, at most MaxEventTargets targets in each: main (when not nil)
// first in every event, then the next targets. No targets, no event.
func recordChunked(ctx context.Context, orgID int64, typ string, main *models.EventTarget, targets []models.EventTarget) error {
	size := MaxEventTargets
	if main != nil {
		size--
	}
	for start := 0; start < len(targets); start += size {
		chunk := targets[start:min(start+size, len(targets))]
		ev := models.AuditEvent{OrgID: orgID, Type: typ, Targets: make([]models.EventTarget, 0, len(chunk)+1)}
		if main != nil {
			ev.Targets = append(ev.Targets, *main)
		}
		ev.Targets = append(ev.Targets, chunk...)
		if err := models.Record(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// userEventTarget is the target naming user id: its display name, or its
// email when it has none.
func userEventTarget(id int64, displayName, email string) models.EventTarget {
	name := displayName
	if name == "" {
		name = email
	}
	return audit.Target(UserTargetType, id, name)
}

// userTarget is the target naming u.
func userTarget(u *User) models.EventTarget {
	return userEventTarget(u.ID, u.DisplayName, u.Email)
}

// groupTarget is the target naming g.
func groupTarget(g *Group) models.EventTarget {
	return audit.Target(GroupTargetType, g.ID, g.Name)
}

// userAuditField is a field of User an update event shows: its API name and
// index in User.
type userAuditField struct {
	name  string
	index int
}

// userAuditFields are the fields of User whose changes user.updated shows:
// every field the API shows (by the name it shows it under) but the id,
// and the role. The password is the event user.password_changed; the
// sign-in state (failures, blocks, token cut-off) and the times are the
// system's, not the update's.
var userAuditFields = sync.OnceValue(func() []userAuditField {
	var out []userAuditField
	t := reflect.TypeFor[User]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("api"), ",")
		switch {
		case f.Name == "Role":
			name = "role"
		case f.Name == "UserName":
			name = "userName"
		case f.Name == "ExternalID":
			name = "externalId"
		case name == "" || name == "-" || name == "id":
			continue
		}
		out = append(out, userAuditField{name: name, index: i})
	}
	return out
})

// userAuditView returns u's fields that user.updated compares, by API
// name. The manager is its id as the API shows it (a digit string: an id
// as a JSON number would lose digits).
func userAuditView(u *User) map[string]any {
	v := reflect.ValueOf(u).Elem()
	fields := userAuditFields()
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		out[f.name] = v.Field(f.index).Interface()
	}
	if u.ManagerID != nil {
		out["manager"] = models.FormatID(*u.ManagerID)
	}
	return out
}

// groupAuditView is what group.updated compares of a group, by the names
// the API shows.
type groupAuditView struct {
	Name           string `json:"name"`
	Description    string `json:"description"`
	MembershipRule string `json:"membership_rule"`
	ExternalID     string `json:"externalId"`
}

func groupAuditOf(g *Group) groupAuditView {
	return groupAuditView{Name: g.Name, Description: g.Description, MembershipRule: g.MembershipRule, ExternalID: g.ExternalID}
}
