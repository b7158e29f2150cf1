package identity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
	"iam/models/secret"
	"iam/models/sqldb"
)

// BlockedForever is the BlockedUntil of an account blocked until an
// administrator lifts the block.
var BlockedForever = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// ErrBadCredentials is the answer to an unknown email or a wrong password;
// the two are not told apart.
var ErrBadCredentials = &models.Error{Code: models.EUNAUTHORIZED, Title: "Sign-in Failed", Detail: "the email or password is wrong"}

// ErrUserInactive is the answer to the right password of an inactive user.
var ErrUserInactive = &models.Error{Code: models.EFORBIDDEN, Title: "Account Inactive", Detail: "the account is inactive"}

// AccountBlockedError is the answer to a sign-in on a blocked account. Until
// is BlockedForever for a block an administrator must lift.
type AccountBlockedError struct{ Until time.Time }

func (e *AccountBlockedError) Error() string {
	if e.Forever() {
		return "the account is blocked until an administrator unblocks it"
	}
	return "the account is blocked until " + e.Until.UTC().Format(time.RFC3339)
}

// Forever reports whether only an administrator can lift the block.
func (e *AccountBlockedError) Forever() bool { return !e.Until.Before(BlockedForever) }

// SignInRefusal is the error of every refused sign-in. Err is the answer
// (ErrBadCredentials, an *AccountBlockedError or ErrUserInactive, which
// errors.Is and errors.As find through it); Reason is the refusal's class
// for the audit log (SignInUnknownEmail ...), never anything the user
// typed; User is the account the email names, nil for an unknown email.
type SignInRefusal struct {
	Err    error
	Reason string
	User   *User
}

func (e *SignInRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the answer.
func (e *SignInRefusal) Unwrap() error { return e.Err }

// The reasons of a SignInRefusal.
const (
	SignInUnknownEmail    = "unknown email"
	SignInWrongPassword   = "wrong password"
	SignInBlockedNow      = "wrong password: the account is now blocked after repeated failures"
	SignInAccountBlocked  = "the account is blocked"
	SignInAccountInactive = "the account is inactive"
)

// Authenticate signs a user of the organization in with email and password
// at time now, applying the account blocking policy (AccountBlockingSettings)
// to failures. It returns the user, or a *SignInRefusal wrapping
// ErrBadCredentials, an *AccountBlockedError (the account is blocked: the
// password decided nothing; or this failure blocked it), or
// ErrUserInactive. The errors tell the reason for logs and the audit log;
// a sign-in page must answer them all alike (no account enumeration, no
// password oracle).
//
// A success records oauth.signin.succeeded, the user its actor and its
// target, in the transaction that clears the user's failures (if any). A
// refusal records no event here: it is a refusal, which the caller records
// (audit.Refusals) outside any transaction.
func (s *UserStore) Authenticate(ctx context.Context, orgID int64, email, password string, policy AccountBlockingSettings, now time.Time) (*User, error) {
	now = now.UTC()
	user, err := s.GetByEmail(ctx, orgID, email)
	if models.ErrorCode(err) == models.ENOTFOUND {
		secret.VerifyPassword(secret.DummyPasswordHash, password) // the same cost as a wrong password
		return nil, &SignInRefusal{Err: ErrBadCredentials, Reason: SignInUnknownEmail}
	}
	if err != nil {
		return nil, err
	}
	if user.BlockedUntil != nil && now.Before(*user.BlockedUntil) {
		// The password is checked all the same, for the same cost as any
		// other answer; it decides nothing and is not counted.
		secret.VerifyPassword(user.PasswordHash, password)
		return nil, &SignInRefusal{Err: &AccountBlockedError{Until: *user.BlockedUntil}, Reason: SignInAccountBlocked, User: user}
	}
	if !secret.VerifyPassword(user.PasswordHash, password) {
		return nil, s.recordFailure(ctx, user, policy, now)
	}
	if user.Status != UserActive {
		return nil, &SignInRefusal{Err: ErrUserInactive, Reason: SignInAccountInactive, User: user}
	}
	if err := s.recordSuccess(ctx, user, policy, now); err != nil {
		return nil, err
	}
	return user, nil
}

// recordFailure counts a failed sign-in of signingIn and blocks the account when
// the count reaches the threshold. It returns the error to answer with (a
// *SignInRefusal), or the store's.
func (s *UserStore) recordFailure(ctx context.Context, signingIn *User, policy AccountBlockingSettings, now time.Time) error {
	userID := signingIn.ID
	var answer error
	reason := SignInWrongPassword
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		answer, reason = ErrBadCredentials, SignInWrongPassword
		user := new(User)
		q := tx.NewSelect().Model(user).Column("failed_logins", "first_failed_login_at", "blocked_until").Where("id = ?", userID)
		q = sqldb.DialectOf(tx).LockRows(q, "UPDATE")
		if err := q.Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil // deleted meanwhile: nothing to count
			}
			return fmt.Errorf("read failed sign-ins: %w", err)
		}
		if user.BlockedUntil != nil && now.Before(*user.BlockedUntil) {
			// blocked by a concurrent failure
			answer, reason = &AccountBlockedError{Until: *user.BlockedUntil}, SignInAccountBlocked
			return nil
		}
		window := time.Duration(policy.FailedAttemptsResetInterval) * time.Minute
		if user.FirstFailedLoginAt == nil || !now.Before(user.FirstFailedLoginAt.Add(window)) {
			user.FailedLogins, user.FirstFailedLoginAt = 1, &now
		} else {
			user.FailedLogins++
		}
		user.BlockedUntil = nil
		if user.FailedLogins >= policy.FailedAttemptsThreshold {
			until := BlockedForever
			if !policy.IsBlockForever {
				until = now.Add(time.Duration(policy.BlockingDuration) * time.Minute)
			}
			user.BlockedUntil = &until
			user.FailedLogins, user.FirstFailedLoginAt = 0, nil
			answer, reason = &AccountBlockedError{Until: until}, SignInBlockedNow
		}
		_, err := tx.NewUpdate().Model((*User)(nil)).
			Set("failed_logins = ?", user.FailedLogins).
			Set("first_failed_login_at = ?", user.FirstFailedLoginAt).
			Set("blocked_until = ?", user.BlockedUntil).
			Set("updated_at = ?", now).
			Where("id = ?", userID).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("record failed sign-in: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return &SignInRefusal{Err: answer, Reason: reason, User: signingIn}
}

// recordSuccess records the sign-in (oauth.signin.succeeded, the user its
// actor and target) and, in the same transaction, clears an expired block
// and, when the policy says so, the failure count.
func (s *UserStore) recordSuccess(ctx context.Context, user *User, policy AccountBlockingSettings, now time.Time) error {
	clearCount := policy.ResetFailureAttemptsOnSuccess && (user.FailedLogins != 0 || user.FirstFailedLoginAt != nil)
	clearBlock := user.BlockedUntil != nil
	target := userTarget(user)
	o := models.OriginOf(ctx)
	o.Actor = models.Actor{Type: models.ActorUser, ID: target.ID, DisplayName: target.DisplayName}
	ctx = models.WithOrigin(ctx, o)
	err := sqldb.InTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if clearCount || clearBlock {
			q := tx.NewUpdate().Model((*User)(nil)).
				Set("blocked_until = NULL").
				Set("updated_at = ?", now).
				Where("id = ?", user.ID)
			if clearCount {
				q = q.Set("failed_logins = 0").Set("first_failed_login_at = NULL")
			}
			if _, err := q.Exec(ctx); err != nil {
				return fmt.Errorf("record sign-in: %w", err)
			}
		}
		return models.Record(ctx, models.AuditEvent{OrgID: user.OrgID, Type: audit.OAuthSigninSucceeded,
			Targets: []models.EventTarget{target}})
	})
	if err != nil {
		return err
	}
	if clearCount {
		user.FailedLogins, user.FirstFailedLoginAt = 0, nil
	}
	user.BlockedUntil = nil
	return nil
}

// UserTarget is the audit event target naming u (its display name, or its
// email when it has none), for the events other packages write of a user
// (a refused sign-in's).
func UserTarget(u *User) models.EventTarget { return userTarget(u) }

// AccountBlockingSettings decide what failed sign-ins do. Both durations are
// in minutes (the interface leaves the unit open).
//
// Failures are counted in a window that opens at the first failure and lasts
// FailedAttemptsResetInterval minutes; a failure after the window opens a new
// one. The FailedAttemptsThreshold-th failure within a window blocks the
// account for BlockingDuration minutes, or until an administrator lifts the
// block when IsBlockForever is set, and clears the count. A successful
// sign-in clears the count when ResetFailureAttemptsOnSuccess is set.
type AccountBlockingSettings struct {
	FailedAttemptsThreshold       int  `json:"failed_attempts_threshold"`
	FailedAttemptsResetInterval   int  `json:"failed_attempts_reset_interval"`
	IsBlockForever                bool `json:"is_block_forever"`
	BlockingDuration              int  `json:"blocking_duration"`
	ResetFailureAttemptsOnSuccess bool `json:"reset_failure_attempts_on_success"`
}

// Validate reports the first field of the account blocking settings that
// breaks its rule (EINVALID).
func (a AccountBlockingSettings) Validate() error {
	const prefix = "account_blocking_settings."
	switch {
	case a.FailedAttemptsThreshold < 1 || a.FailedAttemptsThreshold > 1000:
		return models.Invalid(prefix+"failed_attempts_threshold", "must be between 1 and 1000")
	case a.FailedAttemptsResetInterval < 1 || a.FailedAttemptsResetInterval > MaxBlockingMinutes:
		return models.Invalid(prefix+"failed_attempts_reset_interval", "must be between 1 and %d minutes", MaxBlockingMinutes)
	case !a.IsBlockForever && (a.BlockingDuration < 1 || a.BlockingDuration > MaxBlockingMinutes):
		return models.Invalid(prefix+"blocking_duration", "must be between 1 and %d minutes", MaxBlockingMinutes)
	}
	return nil
}

// MaxBlockingMinutes limits the account blocking settings, in minutes: a
// year at most.
const MaxBlockingMinutes = 365 * 24 * 60
