package oauthstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"iam/models"
	"iam/models/audit"
)

// The token events name a grant's user (none for a service client's own
// grant), its client and the grant itself:
// the tokens issued for one authorization, under fosite's request id, which
// an access token, the refresh token issued with it and every access token
// made from that refresh token share. An event holds ids and names only,
// never a token, a code, a signature or a secret.

// GrantTargetType is the target type of a grant in the token events; its id
// is the grant's request id and its display name says which tokens ("access
// token", "refresh token and 2 access tokens").
const GrantTargetType = "oauth_grant"

// userTargetType is identity's user target type (identity.UserTargetType):
// this area is below identity.
const userTargetType = "user"

// deletedColumns are the columns a delete returns for its events.
const deletedColumns = "kind, request_id, org_id, client_id, user_id"

// grant is what the token events say of a grant.
type grant struct {
	orgID, userID       int64
	clientID, requestID string
}

func grantOf(t *OAuthToken) grant {
	return grant{orgID: t.OrgID, userID: t.UserID, clientID: t.ClientID, requestID: t.RequestID}
}

// recordRevoked records oauth.token.revoked, with reason, for each grant
// whose access or refresh tokens are among deleted (in the order met).
func recordRevoked(ctx context.Context, db bun.IDB, deleted []OAuthToken, reason string) error {
	type revoked struct {
		grant  grant
		counts map[OAuthTokenKind]int
	}
	var order []*revoked
	byRequest := map[string]*revoked{}
	for i := range deleted {
		t := &deleted[i]
		if t.Kind != OAuthAccess && t.Kind != OAuthRefresh {
			continue
		}
		r, ok := byRequest[t.RequestID]
		if !ok {
			r = &revoked{grant: grantOf(t), counts: map[OAuthTokenKind]int{}}
			byRequest[t.RequestID] = r
			order = append(order, r)
		}
		r.counts[t.Kind]++
	}
	for _, r := range order {
		if err := recordGrantEvent(ctx, db, audit.OAuthTokenRevoked, r.grant, r.counts, reason); err != nil {
			return err
		}
	}
	return nil
}

// recordGrantEvent records an event of typ naming g's user, client and g,
// whose tokens counts says, with their names as db has them. A service
// client's own grant has no user: its event names the client and the grant.
func recordGrantEvent(ctx context.Context, db bun.IDB, typ string, g grant, counts map[OAuthTokenKind]int, reason string) error {
	userName, clientName, err := grantNames(ctx, db, g)
	if err != nil {
		return err
	}
	targets := make([]models.EventTarget, 0, 3)
	if g.userID != 0 {
		targets = append(targets, models.EventTarget{Type: userTargetType, ID: models.FormatID(g.userID), DisplayName: userName})
	}
	targets = append(targets, clientTarget(g.clientID, clientName),
		models.EventTarget{Type: GrantTargetType, ID: g.requestID, DisplayName: tokensName(counts)})
	return models.Record(ctx, models.AuditEvent{OrgID: g.orgID, Type: typ, Reason: reason, Targets: targets})
}

// grantNames reads the names of g's user (its display name, or its email
// when it has none, as identity names users in events) and client; empty
// for one deleted meanwhile. The user's row is identity's (the tokens'
// user_id refers to it); this area reads its two name columns only.
func grantNames(ctx context.Context, db bun.IDB, g grant) (user, client string, err error) {
	var u, c sql.NullString
	err = db.NewRaw(`SELECT
		(SELECT CASE WHEN display_name <> '' THEN display_name ELSE email END FROM users WHERE id = ?),
		(SELECT name FROM oauth_clients WHERE id = ?)`, g.userID, g.clientID).Scan(ctx, &u, &c)
	if err != nil {
		return "", "", fmt.Errorf("read the names of a grant's user and client: %w", err)
	}
	return u.String, c.String, nil
}

// tokensName says which tokens counts holds: "refresh token", "access
// token", "refresh token and 2 access tokens".
func tokensName(counts map[OAuthTokenKind]int) string {
	var parts []string
	for _, k := range []OAuthTokenKind{OAuthRefresh, OAuthAccess} {
		switch n := counts[k]; {
		case n == 1:
			parts = append(parts, string(k)+" token")
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s tokens", n, k))
		}
	}
	return strings.Join(parts, " and ")
}
