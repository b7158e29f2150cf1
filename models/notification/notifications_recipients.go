package notification

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
)

// Recipient is what a notification needs of a user: where to reach them and
// the values of the user macros.
type Recipient struct {
	bun.BaseModel `bun:"table:users"`

	ID           int64  `bun:"id"`
	FirstName    string `bun:"first_name"`
	LastName     string `bun:"last_name"`
	DisplayName  string `bun:"display_name"`
	Email        string `bun:"email"`
	MobileNumber string `bun:"mobile_number"`
	Status       int    `bun:"status"`
}

// Name is how the user is addressed: the display name, else first and last
// name, else the email address.
func (r *Recipient) Name() string {
	if n := strings.TrimSpace(r.DisplayName); n != "" {
		return n
	}
	if n := strings.TrimSpace(r.FirstName + " " + r.LastName); n != "" {
		return n
	}
	return r.Email
}

// recipientBatch bounds the ids of one IN list.
const recipientBatch = 500

// Recipients returns the organization's users among ids, in id order.
func (s *NotificationStore) Recipients(ctx context.Context, orgID int64, ids []int64) ([]Recipient, error) {
	return loadRecipients(ctx, s.db, orgID, ids)
}

func loadRecipients(ctx context.Context, db bun.IDB, orgID int64, ids []int64) ([]Recipient, error) {
	out := make([]Recipient, 0, len(ids))
	for start := 0; start < len(ids); start += recipientBatch {
		part := ids[start:min(start+recipientBatch, len(ids))]
		var batch []Recipient
		err := db.NewSelect().Model(&batch).
			Column("id", "first_name", "last_name", "display_name", "email", "mobile_number", "status").
			Where("org_id = ? AND id IN (?)", orgID, bun.List(part)).OrderExpr("id").Scan(ctx)
		if err != nil {
			return nil, fmt.Errorf("select recipients: %w", err)
		}
		out = append(out, batch...)
	}
	return out, nil
}

// notEnrolled returns those of ids (ascending) who have no enrollment data
// for any factor.
func notEnrolled(ctx context.Context, db bun.IDB, orgID int64, ids []int64) ([]int64, error) {
	enrolled := map[int64]bool{}
	for start := 0; start < len(ids); start += recipientBatch {
		part := ids[start:min(start+recipientBatch, len(ids))]
		var found []int64
		err := db.NewSelect().Table("enrollments").ColumnExpr("DISTINCT user_id").
			Where("org_id = ? AND user_id IN (?)", orgID, bun.List(part)).Scan(ctx, &found)
		if err != nil {
			return nil, fmt.Errorf("select enrolled users: %w", err)
		}
		for _, id := range found {
			enrolled[id] = true
		}
	}
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !enrolled[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// userNames returns the names (Recipient.Name) of the organization's users
// among ids; missing users are left out.
func userNames(ctx context.Context, db bun.IDB, orgID int64, ids []int64) (map[int64]string, error) {
	users, err := loadRecipients(ctx, db, orgID, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]string, len(users))
	for i := range users {
		out[users[i].ID] = users[i].Name()
	}
	return out, nil
}
