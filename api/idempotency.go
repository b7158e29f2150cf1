package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"iam/models"
	"iam/models/jobs"
)

// Idempotency keys (docs/operations.md, "Retrying job-starting requests"):
// a route marked Idempotent in routes.go answers a request that carries an
// Idempotency-Key header with the key's first answer for IdempotencyTTL.
// The key's record is reserved before the handler runs, the job the handler
// writes claims it in the job's own transaction (jobs.InsertJob), and the
// answer is recorded before it is sent, so that a retry reaching another
// process after this one died never makes a second job.

// IdempotencyKeyHeader names the key; IdempotentReplayedHeader marks an
// answer that is a recorded one.
const (
	IdempotencyKeyHeader     = "Idempotency-Key"
	IdempotentReplayedHeader = "Idempotent-Replayed"
)

// IdempotencyTTL is how long a key's answer is kept.
const IdempotencyTTL = 24 * time.Hour

// DefaultIdempotencyLease is how long a request owns its key without
// renewing it (it renews every third of it while it runs); a key whose
// owner died is free again (or, when its job was written, answered as
// interrupted) this long after.
const DefaultIdempotencyLease = 30 * time.Second

// CodeIdempotencyKeyReused is the code of a key sent again with another
// request (422).
const CodeIdempotencyKeyReused = "00000115"

// validIdempotencyKey: 1 to 255 visible ASCII characters.
var validIdempotencyKey = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)

// idempotencyAfterAnswerHook, when set (tests), runs after the handler and
// before the answer is recorded: where a process that dies leaves a key
// whose job is written but whose answer is not.
var idempotencyAfterAnswerHook atomic.Pointer[func(c *gin.Context)]

// idempotent wraps the handler of a route that starts work: with an
// Idempotency-Key header the request runs once per key, and its answer is
// replayed to the key's later requests.
func (s *Server) idempotent(h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		values := c.Request.Header.Values(IdempotencyKeyHeader)
		if len(values) == 0 {
			h(c)
			return
		}
		if len(values) > 1 || !validIdempotencyKey.MatchString(values[0]) {
			abortWithError(c, newAPIError(http.StatusBadRequest, CodeInvalidParameter, "Invalid Parameter",
				IdempotencyKeyHeader+": must be one header of 1 to 255 visible ASCII characters"))
			return
		}
		p := principal(c)
		key := jobs.IdemKey{OrgID: p.OrgID, ClientID: p.ClientID, Key: values[0]}
		route := c.Request.Method + " " + c.FullPath()
		token := newIdempotencyToken()
		ctx := c.Request.Context()
		rec, reserved, err := s.store.Idempotency.Reserve(ctx, key, route, token, s.idempotencyLease(), IdempotencyTTL)
		if err != nil {
			abortWithError(c, err)
			return
		}
		if !reserved {
			s.answerAgain(c, rec)
			return
		}
		s.runIdempotent(c, h, key, token)
	}
}

func (s *Server) idempotencyLease() time.Duration {
	if s.cfg.IdempotencyLease > 0 {
		return s.cfg.IdempotencyLease
	}
	return DefaultIdempotencyLease
}

func newIdempotencyToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runIdempotent runs h as the owner of key: the body is fingerprinted as
// the handler streams it, the answer held back until it is recorded.
func (s *Server) runIdempotent(c *gin.Context, h gin.HandlerFunc, key jobs.IdemKey, token string) {
	log := logger(c)
	store := s.store.Idempotency
	fp := newFingerprint(c.Request)
	body := &hashingBody{fp: fp}
	if c.Request.Body != nil {
		body.ReadCloser = c.Request.Body
		c.Request.Body = body
	} else {
		body.ReadCloser, body.eof = io.NopCloser(http.NoBody), true
	}
	real := c.Writer
	held := &heldWriter{ResponseWriter: real, status: http.StatusOK}
	c.Writer = held
	ctx := jobs.WithIdempotencyClaim(c.Request.Context(), &jobs.IdempotencyClaim{Key: key, Token: token})
	c.Request = c.Request.WithContext(ctx)

	// Renew the lease while the handler runs (an upload may take minutes).
	stopRenew := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		lease := s.idempotencyLease()
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stopRenew:
				return
			case <-t.C:
				if _, err := store.Renew(context.WithoutCancel(ctx), key, token, lease); err != nil {
					log.Warn("idempotency key lease not renewed", "error", err)
				}
			}
		}
	}()
	done := false
	defer func() {
		c.Writer = real
		if !done { // the handler panicked: give the key back unless a job was written
			select {
			case <-stopRenew:
			default:
				close(stopRenew)
				<-renewed
			}
			fp.abandon()
			if _, err := store.Release(context.WithoutCancel(ctx), key, token); err != nil {
				log.Warn("idempotency key not released", "error", err)
			}
		}
	}()

	h(c)
	close(stopRenew) // a process that dies from here on renews nothing either
	<-renewed

	// The fingerprint covers the whole body: read what the handler left
	// (a multipart epilogue), up to a bound.
	if !body.eof {
		_, _ = io.CopyN(io.Discard, body, 64<<10)
	}
	sum := fp.sum()
	if hook := idempotencyAfterAnswerHook.Load(); hook != nil {
		(*hook)(c)
	}
	testHookIdempotentAnswered(held.status)
	ans := jobs.IdempotentAnswer{Fingerprint: sum, Status: held.status, ContentType: held.Header().Get("Content-Type"),
		Location: held.Header().Get("Location"), Body: held.buf.Bytes()}
	bg := context.WithoutCancel(ctx)
	if body.eof && replayable(held.status) && len(ans.Body) <= jobs.MaxIdempotentAnswer {
		if ok, err := store.Complete(bg, key, token, ans); err != nil {
			log.Warn("idempotent answer not recorded", "error", err)
		} else if !ok {
			log.Warn("idempotent answer not recorded: the key was taken over")
		}
	} else if kept, err := store.Release(bg, key, token); err != nil {
		log.Warn("idempotency key not released", "error", err)
	} else if kept != nil && len(ans.Body) <= jobs.MaxIdempotentAnswer {
		// A job was written: the key stays its own, whatever the answer.
		if _, err := store.Complete(bg, key, token, ans); err != nil {
			log.Warn("idempotent answer not recorded", "error", err)
		}
	}
	done = true
	held.release(real)
}

// replayable reports whether an answer of status is kept for the key: not
// an outage, a limit or a conflict a later try may not meet.
func replayable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

// answerAgain answers a request whose key is taken: in flight (409), its
// first request interrupted after writing its job (409 with the job's
// Location), or answered (the answer again, or 422 for another request).
func (s *Server) answerAgain(c *gin.Context, rec *jobs.IdempotencyRecord) {
	if rec.InFlight() {
		if rec.JobID != nil && !rec.LockedUntil.After(time.Now()) {
			id := models.FormatID(*rec.JobID)
			c.Header("Location", "/api/v1/jobs/"+id)
			abortWithError(c, newAPIError(http.StatusConflict, CodeConflict, "Idempotent Request Interrupted",
				"the first request with this Idempotency-Key wrote job "+id+" and stopped before answering; the job goes on: follow it at /api/v1/jobs/"+id))
			return
		}
		wait := max(1, int(time.Until(rec.LockedUntil).Seconds()+0.5))
		ae := newAPIError(http.StatusConflict, CodeConflict, "Idempotent Request In Progress",
			"a request with this Idempotency-Key is being served; retry after Retry-After seconds")
		ae.RetryAfter = min(wait, 5)
		abortWithError(c, ae)
		return
	}
	fp := newFingerprint(c.Request)
	if c.Request.Body != nil {
		var r io.Reader = c.Request.Body
		if s.cfg.UploadIdleTimeout > 0 {
			r = &idleBody{ReadCloser: c.Request.Body, rc: http.NewResponseController(c.Writer), idle: s.cfg.UploadIdleTimeout}
			defer func() { _ = http.NewResponseController(c.Writer).SetReadDeadline(time.Time{}) }()
		}
		if _, err := io.Copy(fp, r); err != nil {
			fp.abandon()
			abortWithError(c, uploadReadError(err))
			return
		}
	}
	if fp.sum() != rec.Fingerprint {
		abortWithError(c, newAPIError(http.StatusUnprocessableEntity, CodeIdempotencyKeyReused, "Idempotency Key Reused",
			"this Idempotency-Key was sent with another request (method, path, query or body): use a new key for a new request"))
		return
	}
	if rec.Location != "" {
		c.Header("Location", rec.Location)
	}
	c.Header(IdempotentReplayedHeader, "true")
	c.Data(rec.Status, rec.ContentType, rec.Body)
}

// hashingBody feeds what the handler reads of the body to the fingerprint.
type hashingBody struct {
	io.ReadCloser
	fp  *fingerprint
	eof bool
}

func (b *hashingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_, _ = b.fp.Write(p[:n])
	}
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// fingerprint hashes a request as it streams: its method, path and query,
// and its body. A multipart body is hashed by its parts (name, file name,
// content type, content), not its bytes, so that a client that retries the
// same form with a new boundary sends the same request; anything else by
// its bytes. Nothing is buffered.
type fingerprint struct {
	h hash.Hash
	// multipart: the body goes through pw to a parser hashing each part.
	pw     *io.PipeWriter
	parsed chan string
}

func newFingerprint(r *http.Request) *fingerprint {
	f := &fingerprint{h: sha256.New()}
	writeField(f.h, r.Method)
	writeField(f.h, r.URL.Path)
	writeField(f.h, r.URL.RawQuery)
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mediaType == "multipart/form-data" && params["boundary"] != "" {
		writeField(f.h, mediaType)
		pr, pw := io.Pipe()
		f.pw, f.parsed = pw, make(chan string, 1)
		go func() { f.parsed <- hashParts(pr, params["boundary"]) }()
		return f
	}
	writeField(f.h, r.Header.Get("Content-Type"))
	return f
}

// Write takes the next bytes of the body.
func (f *fingerprint) Write(p []byte) (int, error) {
	if f.pw != nil {
		_, _ = f.pw.Write(p) // the parser drains whatever it cannot parse
		return len(p), nil
	}
	return f.h.Write(p)
}

// sum ends the body and returns the hex digest.
func (f *fingerprint) sum() string {
	if f.pw != nil {
		_ = f.pw.Close()
		writeField(f.h, <-f.parsed)
		f.pw = nil
	}
	return hex.EncodeToString(f.h.Sum(nil))
}

// abandon stops the parser of a body not read to its end.
func (f *fingerprint) abandon() {
	if f.pw != nil {
		_ = f.pw.CloseWithError(io.ErrUnexpectedEOF)
		<-f.parsed
		f.pw = nil
	}
}

// hashParts hashes the parts of a multipart body read from r (not its
// preamble and epilogue, which carry nothing); a body that does not parse,
// or holds no part, is hashed by its bytes instead. It reads r to its end
// whatever happens.
func hashParts(r io.Reader, boundary string) string {
	h := sha256.New()
	raw := sha256.New()
	mr := multipart.NewReader(io.TeeReader(r, raw), boundary)
	byBytes := func() string {
		_, _ = io.Copy(raw, r)
		return "bytes:" + hex.EncodeToString(raw.Sum(nil))
	}
	parts := 0
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return byBytes()
		}
		parts++
		writeField(h, part.FormName())
		writeField(h, part.FileName())
		writeField(h, part.Header.Get("Content-Type"))
		ph := sha256.New()
		n, err := io.Copy(ph, part)
		if err != nil {
			return byBytes()
		}
		writeField(h, strconv.FormatInt(n, 10))
		writeField(h, hex.EncodeToString(ph.Sum(nil)))
	}
	if parts == 0 {
		return byBytes()
	}
	_, _ = io.Copy(io.Discard, r) // the epilogue
	return "parts:" + hex.EncodeToString(h.Sum(nil))
}

// writeField writes s length-prefixed, so that fields cannot run together.
func writeField(h io.Writer, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = h.Write(n[:])
	_, _ = io.WriteString(h, s)
}

// heldWriter holds an answer back until it is recorded: headers go to the
// real writer's header map (sent with release), status and body are kept.
type heldWriter struct {
	gin.ResponseWriter
	status  int
	written bool
	buf     bytes.Buffer
}

func (w *heldWriter) WriteHeader(code int) {
	if !w.written && code > 0 {
		w.status = code
	}
}
func (w *heldWriter) WriteHeaderNow() { w.written = true }
func (w *heldWriter) Write(p []byte) (int, error) {
	w.written = true
	return w.buf.Write(p)
}
func (w *heldWriter) WriteString(s string) (int, error) {
	w.written = true
	return w.buf.WriteString(s)
}
func (w *heldWriter) Status() int   { return w.status }
func (w *heldWriter) Written() bool { return w.written }
func (w *heldWriter) Size() int {
	if !w.written {
		return -1
	}
	return w.buf.Len()
}
func (w *heldWriter) Flush() {}

// Unwrap lets http.ResponseController reach the connection (read
// deadlines of uploads).
func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// release sends the held answer through real.
func (w *heldWriter) release(real gin.ResponseWriter) {
	real.WriteHeader(w.status)
	if w.buf.Len() > 0 {
		_, _ = real.Write(w.buf.Bytes())
	} else {
		real.WriteHeaderNow()
	}
}
