package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Organization is a tenant. Every other row belongs to exactly one.
type Organization struct {
	bun.BaseModel `bun:"table:organizations"`

	ID        int64     `bun:"id,pk"`
	Name      string    `bun:"name"`
	TimeZone  string    `bun:"time_zone"`
	CreatedAt time.Time `bun:"created_at"`
}

// OrgStore reads and writes organizations.
type OrgStore struct{ db bun.IDB }

// Create inserts org, filling its id and creation time. EINVALID when the
// name is empty or the time zone unknown.
func (s *OrgStore) Create(ctx context.Context, org *Organization) error {
	if org.Name == "" {
		return Invalid("name", "is required")
	}
	if org.TimeZone == "" {
		org.TimeZone = "UTC"
	}
	if _, err := time.LoadLocation(org.TimeZone); err != nil {
		return Invalid("time_zone", "unknown time zone %q", org.TimeZone)
	}
	org.ID = NewID()
	org.CreatedAt = time.Now().UTC()
	if _, err := s.db.NewInsert().Model(org).Exec(ctx); err != nil {
		return fmt.Errorf("insert organization: %w", err)
	}
	return nil
}

// Get returns one organization. ENOTFOUND when missing.
func (s *OrgStore) Get(ctx context.Context, id int64) (*Organization, error) {
	org := new(Organization)
	err := s.db.NewSelect().Model(org).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, NotFound("Organization", "the organization does not exist")
	}
	if err != nil {
		return nil, fmt.Errorf("select organization: %w", err)
	}
	return org, nil
}

// First returns the oldest organization, or ENOTFOUND when there is none yet.
func (s *OrgStore) First(ctx context.Context) (*Organization, error) {
	org := new(Organization)
	err := s.db.NewSelect().Model(org).Order("id").Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, NotFound("Organization", "no organization exists yet")
	}
	if err != nil {
		return nil, fmt.Errorf("select organization: %w", err)
	}
	return org, nil
}
