package enrollment

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iam/models"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Enrollment is one user's enrollment data for one factor config: the OTP
// address or number (Value), a sealed TOTP secret (Secret, never in the
// clear), or a smart card's certificate (Value is its subject). JobID and
// SourceRow name the job and row that wrote it, which makes a retried chunk
// recognize its own earlier writes.
type Enrollment struct {
	bun.BaseModel `bun:"table:enrollments"`

	OrgID          int64      `bun:"org_id"`
	UserID         int64      `bun:"user_id,pk"`
	FactorConfigID int64      `bun:"factor_config_id,pk"`
	FactorType     FactorType `bun:"factor_type"`
	Value          string     `bun:"value"`
	Secret         []byte     `bun:"secret"`
	Thumbprint     string     `bun:"thumbprint"`
	ExpiresAt      *time.Time `bun:"expires_at"`
	JobID          int64      `bun:"job_id"`
	SourceRow      int64      `bun:"source_row"`
	UpdatedAt      time.Time  `bun:"updated_at"`
}

// EnrollmentStore reads and writes enrollment data.
type EnrollmentStore struct {
	db *bun.DB
	d  enrollmentDialect
}

// NewEnrollmentStore returns the EnrollmentStore over db.
func NewEnrollmentStore(db *bun.DB) *EnrollmentStore {
	return &EnrollmentStore{db: db, d: enrollmentDialectOf(db)}
}

// UserKey is the user attribute a row or a file name identifies a user by.
type UserKey string

// The user keys: spec 4.4's certificate_filename_pattern values, which the
// CSV's user columns share.
const (
	KeyPrimaryEmail UserKey = "Primary Email"
	KeyEmployeeID   UserKey = "Employee ID"
	KeyMobileNumber UserKey = "Mobile Number"
)

// ParseUserKey reads a certificate_filename_pattern or user column name.
func ParseUserKey(s string) (UserKey, bool) {
	for _, k := range []UserKey{KeyPrimaryEmail, KeyEmployeeID, KeyMobileNumber} {
		if strings.EqualFold(strings.TrimSpace(s), string(k)) {
			return k, true
		}
	}
	return "", false
}

// NormalizeKey returns the form of a key value that MatchUsers compares:
// emails ignore case, the others are compared as written (trimmed).
func (k UserKey) NormalizeKey(v string) string {
	v = strings.TrimSpace(v)
	if k == KeyPrimaryEmail {
		return strings.ToLower(v)
	}
	return v
}

// MatchUsers returns the ids of the organization's users whose key
// attribute has one of values, keyed by the normalized value. Values
// should be normalized with NormalizeKey; empty ones never match. A value
// that several users share (a mobile number) matches the oldest of them.
func (s *EnrollmentStore) MatchUsers(ctx context.Context, orgID int64, key UserKey, values []string) (map[string]int64, error) {
	out := make(map[string]int64, len(values))
	want := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" {
			want = append(want, v)
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	return s.d.matchUsers(ctx, s.db, orgID, key, want)
}

// List returns the enrollments of one user, for tests and the users API.
func (s *EnrollmentStore) List(ctx context.Context, orgID, userID int64) ([]Enrollment, error) {
	var out []Enrollment
	err := s.db.NewSelect().Model(&out).Where("org_id = ? AND user_id = ?", orgID, userID).
		Order("factor_config_id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("select enrollments: %w", err)
	}
	return out, nil
}

// Cursor returns the byte offset in a job's file at which row starts, as
// recorded by the chunk before it (or by SetCursor for the first).
// ENOTFOUND when none was recorded.
func (s *EnrollmentStore) Cursor(ctx context.Context, jobID, row int64) (int64, error) {
	cur := new(enrollmentCursor)
	err := s.db.NewSelect().Model(cur).Where("job_id = ? AND next_row = ?", jobID, row).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, models.NotFound("Cursor", fmt.Sprintf("no byte offset is recorded for row %d", row))
	}
	if err != nil {
		return 0, fmt.Errorf("select cursor: %w", err)
	}
	return cur.ByteOffset, nil
}

// SetCursor records that row of a job's file starts at offset. Recording the
// same row again keeps the first offset.
func (s *EnrollmentStore) SetCursor(ctx context.Context, jobID, row, offset int64) error {
	return setCursor(ctx, s.db, jobID, row, offset)
}

func setCursor(ctx context.Context, db bun.IDB, jobID, row, offset int64) error {
	cur := &enrollmentCursor{JobID: jobID, NextRow: row, ByteOffset: offset}
	_, err := db.NewInsert().Model(cur).On("CONFLICT (job_id, next_row) DO NOTHING").Exec(ctx)
	if err != nil {
		return fmt.Errorf("insert cursor: %w", err)
	}
	return nil
}

// enrollmentCursor records where a row of a job's file starts.
type enrollmentCursor struct {
	bun.BaseModel `bun:"table:enrollment_cursors"`

	JobID      int64 `bun:"job_id,pk"`
	NextRow    int64 `bun:"next_row,pk"`
	ByteOffset int64 `bun:"byte_offset"`
}
