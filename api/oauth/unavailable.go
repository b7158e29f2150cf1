package oauth

import (
	"context"
	"net/http"

	"github.com/ory/fosite"

	"iam/api/auth"
	"iam/models"
)

// An outage of the store (models.IsUnavailable) is never reported as a bad
// client, grant, token or password: fosite reports a client it could not
// load as invalid_client, and a sign-in whose user could not be read would
// look like a wrong password. The endpoints answer 503 with Retry-After
// instead: RFC 6749's temporarily_unavailable in JSON, the page saying so in
// the browser. Nothing is counted as a failed sign-in.

// unavailableMessage is what the pages say during an outage.
const unavailableMessage = "The service is temporarily unavailable. Try again in a few seconds."

// writeAccessError is the provider's WriteAccessError, except that an error
// of an unavailable store is answered 503 temporarily_unavailable with
// Retry-After, whatever fosite made of it.
func (s *Server) writeAccessError(ctx context.Context, w http.ResponseWriter, ar fosite.AccessRequester, err error) {
	if models.IsUnavailable(err) {
		s.log.WarnContext(ctx, "OAuth request not served: the store is unavailable", "cause", storeCause(err))
		auth.SetRetryAfter(w.Header())
		writeJSON(w, http.StatusServiceUnavailable, oauthError{Error: "temporarily_unavailable",
			Description: "The authorization server is temporarily unavailable; retry after Retry-After seconds with the same credentials."})
		return
	}
	s.provider.WriteAccessError(ctx, w, ar, err)
}

// unavailablePage answers a browser request with the 503 page and returns
// true when err is an error of an unavailable store; it writes nothing and
// returns false otherwise.
func (s *Server) unavailablePage(ctx context.Context, w http.ResponseWriter, err error) bool {
	if !models.IsUnavailable(err) {
		return false
	}
	s.log.WarnContext(ctx, "OAuth page not served: the store is unavailable", "cause", storeCause(err))
	auth.SetRetryAfter(w.Header())
	s.renderError(w, http.StatusServiceUnavailable, "Temporarily unavailable", unavailableMessage)
	return true
}

// storeCause is the text of the store error behind err, for the logs
// (fosite's errors would print their stack).
func storeCause(err error) string {
	if c := fmtCause(err); c != "" {
		return c
	}
	return err.Error()
}
