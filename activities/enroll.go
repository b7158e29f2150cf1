package activities

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"iam/models"
	"iam/models/enrollment"
	"iam/models/identity"
	"iam/models/secret"
	"iam/models/store"
)

// Enrollment holds the quick-enrollment activities: CSV files and smart-card
// archives read chunk by chunk from the blob store into enrollment data.
type Enrollment struct {
	Store *store.Store
	// Secrets seals TOTP secrets before they are stored. Without it, rows
	// that carry a secret fail and nothing secret is written.
	Secrets *secret.Box

	ahead lookahead // CSV chunks prepared ahead of their activity
}

// EnrollChunkResult is what a chunk activity reports: the job's progress
// after it, the first row after it, and whether the file has no more rows.
type EnrollChunkResult struct {
	Progress Progress `json:"progress"`
	Next     int64    `json:"next"`
	Done     bool     `json:"done"`
}

// heartbeat records progress for Temporal when ctx is an activity's; a
// worker that dies is noticed within the heartbeat timeout.
func heartbeat(ctx context.Context, details any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details)
	}
}

// heartbeatOnClock records the activity's heartbeat with details() every
// interval until stop is called: for a step whose work can block (a slow
// receiver or server), so that a live worker never looks dead. Once ctx
// ends (cancelled, or the worker stops) it falls silent, so that Temporal
// hands the work to another worker.
func heartbeatOnClock(ctx context.Context, every time.Duration, details func() any) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	quit := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, details())
			}
		}
	}()
	return func() { close(quit) }
}

// invalidInput is the non-retryable error of a job input that breaks a rule.
func invalidInput(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrInvalid, nil)
}

// factorPlan is what a chunk needs to know of the chosen factor configs.
type factorPlan struct {
	configs []enrollment.FactorConfig
	names   map[int64]string
}

func (a *Enrollment) plan(ctx context.Context, orgID int64, ids []int64) (*factorPlan, error) {
	configs, err := a.Store.Factors.Resolve(ctx, orgID, ids)
	if err != nil {
		if models.ErrorCode(err) == models.EINVALID {
			return nil, invalidInput("the job's factor configs no longer exist: %v", err)
		}
		return nil, err
	}
	p := &factorPlan{configs: configs, names: map[int64]string{}}
	for _, c := range configs {
		p.names[c.ID] = c.DisplayName
	}
	return p, nil
}

// pendingRow is a row on its way to ApplyChunk: its user key, and its
// enrollment data before the user is known. A TOTP secret waits in secret
// until it is sealed for its user.
type pendingRow struct {
	row    int64
	key    string
	errs   []string
	data   []enrollment.Enrollment
	secret map[int64]string // factor config id -> normalized secret
	// certs are the row's smart-card certificates by factor config id,
	// checked against the configs' enabled CAs once the user is known.
	certs map[int64]*x509.Certificate
}

func (p *pendingRow) addCert(factorID int64, cert *x509.Certificate) {
	if p.certs == nil {
		p.certs = map[int64]*x509.Certificate{}
	}
	p.certs[factorID] = cert
}

func (p *pendingRow) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// checkCerts fails the rows whose smart-card certificate no enabled CA of
// its factor config signed, or that does not name the row's user by the
// CA's mapping attribute (models.CATrust.Check). A config with no enabled CA
// accepts its certificates.
func (a *Enrollment) checkCerts(ctx context.Context, orgID int64, rows []pendingRow, users map[string]int64) error {
	factorIDs, userIDs := []int64{}, []int64{}
	seen := map[int64]bool{}
	for _, r := range rows {
		if len(r.errs) > 0 || users[r.key] == 0 {
			continue
		}
		for id := range r.certs {
			if !seen[id] {
				seen[id] = true
				factorIDs = append(factorIDs, id)
			}
		}
		if len(r.certs) > 0 {
			userIDs = append(userIDs, users[r.key])
		}
	}
	if len(userIDs) == 0 {
		return nil
	}
	trust, err := a.Store.CAs.Trust(ctx, orgID, factorIDs)
	if err != nil {
		return temporalError(err)
	}
	if len(trust) == 0 {
		return nil
	}
	byID, err := a.Store.Users.ByIDs(ctx, orgID, userIDs)
	if err != nil {
		return temporalError(err)
	}
	now := time.Now()
	for i := range rows {
		r := &rows[i]
		u := byID[users[r.key]]
		if len(r.errs) > 0 || u == nil {
			continue
		}
		for id, cert := range r.certs {
			if err := trust[id].Check(cert, u, now); err != nil {
				r.fail("%v", err)
			}
		}
	}
	return nil
}

// finish matches the rows' users and seals their secrets, and returns the
// rows ApplyChunk writes.
func (a *Enrollment) finish(ctx context.Context, orgID int64, key enrollment.UserKey, rows []pendingRow) ([]enrollment.ChunkRow, error) {
	keys := make([]string, 0, len(rows))
	for _, r := range rows {
		keys = append(keys, r.key)
	}
	users, err := a.Store.Enrollments.MatchUsers(ctx, orgID, key, keys)
	if err != nil {
		return nil, err
	}
	if err := a.checkCerts(ctx, orgID, rows, users); err != nil {
		return nil, err
	}
	out := make([]enrollment.ChunkRow, len(rows))
	for i := range rows {
		r := &rows[i]
		out[i].Row = r.row
		out[i].UserID = users[r.key] // named in the result even when the row fails
		if out[i].UserID == 0 && r.key != "" {
			r.fail("no user of the organization has %s %q", key, r.key)
		}
		if len(r.errs) == 0 {
			for _, e := range r.data {
				if s, ok := r.secret[e.FactorConfigID]; ok {
					if a.Secrets == nil {
						r.fail("the service has no encryption key (IAM_ENCRYPTION_KEY), so TOTP secrets cannot be stored")
						break
					}
					e.Secret = a.Secrets.Seal([]byte(s), identity.EnrollmentSecretAAD(orgID, out[i].UserID, e.FactorConfigID))
				}
				out[i].Enrollments = append(out[i].Enrollments, e)
			}
		}
		if len(r.errs) > 0 {
			out[i].Error = strings.Join(r.errs, "; ")
			out[i].Enrollments = nil
		}
	}
	return out, nil
}
