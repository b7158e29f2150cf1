package identity_test

import (
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/modeltest"
	"iam/models/store"
)

const rightPassword = "correct horse battery"

// signIns drives UserStore.Authenticate with a clock of its own.
type signIns struct {
	t      *testing.T
	users  *identity.UserStore
	orgID  int64
	email  string
	policy identity.AccountBlockingSettings
	now    time.Time
}

func newSignIns(t *testing.T, db *bun.DB, policy identity.AccountBlockingSettings) *signIns {
	t.Helper()
	org := &identity.Organization{Name: "Org"}
	if err := store.NewStore(db).Orgs.Create(t.Context(), org); err != nil {
		t.Fatal(err)
	}
	u := modeltest.NewUser(t, db, org.ID, "user@example.com", identity.RoleUser)
	return &signIns{t: t, users: store.NewStore(db).Users, orgID: org.ID, email: u.Email, policy: policy,
		now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

func (s *signIns) try(password string) error {
	s.t.Helper()
	_, err := s.users.Authenticate(s.t.Context(), s.orgID, s.email, password, s.policy, s.now)
	return err
}

func (s *signIns) wantOK(password string) {
	s.t.Helper()
	if err := s.try(password); err != nil {
		s.t.Fatalf("at %s: sign-in = %v, want success", s.now.Format(time.TimeOnly), err)
	}
}

func (s *signIns) wantBadCredentials(password string) {
	s.t.Helper()
	if err := s.try(password); !errors.Is(err, identity.ErrBadCredentials) {
		s.t.Fatalf("at %s: sign-in = %v, want bad credentials", s.now.Format(time.TimeOnly), err)
	}
}

func (s *signIns) wantBlocked(password string, until time.Time) {
	s.t.Helper()
	var blocked *identity.AccountBlockedError
	if err := s.try(password); !errors.As(err, &blocked) || !blocked.Until.Equal(until) {
		s.t.Fatalf("at %s: sign-in = %v, want blocked until %s", s.now.Format(time.TimeOnly), err, until)
	}
}

func policy(threshold, interval, duration int, forever, resetOnSuccess bool) identity.AccountBlockingSettings {
	return identity.AccountBlockingSettings{
		FailedAttemptsThreshold:       threshold,
		FailedAttemptsResetInterval:   interval,
		BlockingDuration:              duration,
		IsBlockForever:                forever,
		ResetFailureAttemptsOnSuccess: resetOnSuccess,
	}
}

func TestUserStore_Authenticate(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		t.Run("blocks for the duration after the threshold", func(t *testing.T) {
			s := newSignIns(t, db, policy(3, 10, 5, false, true))
			s.wantOK(rightPassword)
			s.wantBadCredentials("wrong")
			s.now = s.now.Add(time.Minute)
			s.wantBadCredentials("wrong")
			s.now = s.now.Add(time.Minute)
			until := s.now.Add(5 * time.Minute)
			s.wantBlocked("wrong", until)
			// While blocked even the right password is refused (checked for
			// the cost only, deciding nothing).
			s.now = s.now.Add(4 * time.Minute)
			s.wantBlocked(rightPassword, until)
			s.now = until
			s.wantOK(rightPassword)
			// The block cleared the count: two more failures do not block.
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
		})
		t.Run("failures outside the interval start a new count", func(t *testing.T) {
			s := newSignIns(t, db, policy(3, 10, 5, false, true))
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
			s.now = s.now.Add(10 * time.Minute)
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
			s.wantBlocked("wrong", s.now.Add(5*time.Minute))
		})
		t.Run("success resets the count when the setting says so", func(t *testing.T) {
			s := newSignIns(t, db, policy(3, 10, 5, false, true))
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
			s.wantOK(rightPassword)
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
		})
		t.Run("success keeps the count otherwise", func(t *testing.T) {
			s := newSignIns(t, db, policy(3, 10, 5, false, false))
			s.wantBadCredentials("wrong")
			s.wantBadCredentials("wrong")
			s.wantOK(rightPassword)
			s.wantBlocked("wrong", s.now.Add(5*time.Minute))
		})
		t.Run("blocks forever", func(t *testing.T) {
			s := newSignIns(t, db, policy(2, 10, 0, true, true))
			s.wantBadCredentials("wrong")
			s.wantBlocked("wrong", identity.BlockedForever)
			s.now = s.now.AddDate(5, 0, 0)
			s.wantBlocked(rightPassword, identity.BlockedForever)
		})
		t.Run("unknown email and inactive user", func(t *testing.T) {
			s := newSignIns(t, db, policy(3, 10, 5, false, true))
			s.email = "nobody@example.com"
			s.wantBadCredentials(rightPassword)

			inactive := &identity.User{OrgID: s.orgID, Email: "gone@example.com", Status: identity.UserInactive}
			if err := s.users.Create(t.Context(), inactive, rightPassword); err != nil {
				t.Fatal(err)
			}
			s.email = inactive.Email
			if err := s.try(rightPassword); !errors.Is(err, identity.ErrUserInactive) {
				t.Errorf("inactive user with the right password = %v, want ErrUserInactive", err)
			}
			s.wantBadCredentials("wrong")
		})
	})
}
