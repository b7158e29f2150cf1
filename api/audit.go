package api

import (
	"bufio"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models/audit"
	"iam/models/listing"
)

// ndjson is the media type of a streamed export: one JSON document a line.
const ndjson = "application/x-ndjson"

// wantsNDJSON reports whether the request asks for a streamed export.
func wantsNDJSON(c *gin.Context) bool {
	return strings.Contains(c.GetHeader("Accept"), ndjson)
}

// auditQuery reads the query of GET /audit-events: filter, since, until,
// sort_order, limit and cursor. The cursor is the audit log's own (a
// position in the commit order that audit.EventStore.List checks against
// the query), not the keyset cursor of listing.Parse, which is left out.
func auditQuery(query url.Values) (audit.Query, error) {
	var q audit.Query
	rest := maps.Clone(query)
	delete(rest, "cursor")
	p, err := listing.Parse(rest, audit.EventListing)
	if err != nil {
		return q, err
	}
	q.Filter, q.Limit = p.Filter, p.Limit
	switch cursors := query["cursor"]; len(cursors) {
	case 0:
	case 1:
		q.Cursor = strings.TrimSpace(cursors[0])
	default:
		return q, &listing.ParamError{Param: "cursor", Detail: "is given more than once"}
	}
	for _, bound := range []struct {
		name string
		dest *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := query.Get(bound.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return q, &listing.ParamError{Param: bound.name, Detail: "must be an RFC 3339 date-time"}
			}
			*bound.dest = t
		}
	}
	switch order := query.Get("sort_order"); strings.ToUpper(order) {
	case "", "ASCENDING":
	case "DESCENDING":
		q.Descending = true
	default:
		return q, &listing.ParamError{Param: "sort_order", Detail: "must be ASCENDING or DESCENDING"}
	}
	return q, nil
}

// listAuditEvents: GET /audit-events, a page of the organization's audit
// events in commit order (or the newest first), or with Accept:
// application/x-ndjson every matching event, streamed.
func (s *Server) listAuditEvents(c *gin.Context) error {
	q, err := auditQuery(c.Request.URL.Query())
	if err != nil {
		return err
	}
	org := principal(c).OrgID
	if wantsNDJSON(c) {
		return s.streamNDJSON(c, func(write func(line string) error) error {
			return s.store.Audit.Each(c.Request.Context(), org, q, write)
		})
	}
	events, meta, err := s.store.Audit.List(c.Request.Context(), org, q)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{"data": events, "meta": meta})
	return nil
}

// getAuditEvent: GET /audit-events/{event_id}.
func (s *Server) getAuditEvent(c *gin.Context) error {
	id, err := pathID(c, "event_id", audit.ErrEventNotFound)
	if err != nil {
		return err
	}
	event, err := s.store.Audit.Get(c.Request.Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, event)
	return nil
}

// digestExportBatch is how many digests the NDJSON export reads at a time.
const digestExportBatch = 1000

// listAuditDigests: GET /audit-digests, the organization's digests oldest
// first (from, limit), or with Accept: application/x-ndjson all of them.
func (s *Server) listAuditDigests(c *gin.Context) error {
	ctx, org := c.Request.Context(), principal(c).OrgID
	p, err := listing.Parse(c.Request.URL.Query(), audit.DigestListing)
	if err != nil {
		return err
	}
	from, limit := p.From, p.Limit
	if wantsNDJSON(c) {
		return s.streamNDJSON(c, func(write func(line string) error) error {
			for next := int64(1); ; {
				page, listErr := s.store.Digests.List(ctx, org, next, digestExportBatch)
				if listErr != nil {
					return listErr
				}
				for _, d := range page {
					b, marshalErr := json.Marshal(d)
					if marshalErr != nil {
						return marshalErr
					}
					if writeErr := write(string(b)); writeErr != nil {
						return writeErr
					}
					next = d.Number + 1
				}
				if len(page) < digestExportBatch {
					return nil
				}
			}
		})
	}
	digests, err := s.store.Digests.List(ctx, org, int64(from)+1, limit)
	if err != nil {
		return err
	}
	total, err := s.store.Digests.Count(ctx, org)
	if err != nil {
		return err
	}
	if digests == nil {
		digests = []audit.Digest{}
	}
	c.JSON(http.StatusOK, gin.H{"data": digests, "meta": listing.OffsetMeta{StartIndex: listing.StartIndex{N: from}, Limit: limit, Total: total}})
	return nil
}

// auditPublicKey: GET /audit-digests/public-key, the key that checks the
// digests' signatures.
func (s *Server) auditPublicKey(c *gin.Context) error {
	key := s.deps.AuditKey
	if len(key) != ed25519.PublicKeySize {
		return newAPIError(http.StatusNotFound, CodeNotFound, "Audit Signing Key Not Found",
			"this service has no audit signing key (IAM_AUDIT_SIGNING_KEY): its events are not sealed")
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, gin.H{
		"algorithm":  "Ed25519",
		"key_id":     audit.KeyID(key),
		"public_key": base64.StdEncoding.EncodeToString(key),
		"pem":        string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
	})
	return nil
}

// streamNDJSON answers 200 with one JSON document a line, as each writes
// them, flushing every few lines: constant memory whatever the count. An
// error after the first line can only end the stream early (the status is
// sent); the client sees a last line that is not complete JSON.
func (s *Server) streamNDJSON(c *gin.Context, each func(write func(line string) error) error) error {
	c.Header("Content-Type", ndjson)
	c.Status(http.StatusOK)
	w := bufio.NewWriterSize(c.Writer, 32<<10)
	n := 0
	err := each(func(line string) error {
		if _, err := w.WriteString(line); err != nil {
			return err
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		if n++; n%256 == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			c.Writer.Flush()
		}
		return nil
	})
	if err != nil {
		logger(c).ErrorContext(c.Request.Context(), "audit export ended early", "error", err)
		c.Abort()
		return nil
	}
	return w.Flush()
}
