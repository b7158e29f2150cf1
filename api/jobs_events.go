package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"iam/api/auth"
	"iam/models"
	"iam/models/jobs"
)

// GET /jobs/{job_id}/events follows a job as Server-Sent Events
// (docs/operations.md). The state comes from the job's row, never from this
// process's memory, so a client may reconnect to any `iam serve` replica:
//
//   - the job's current state at once (event "progress", or "end" when it
//     has finished), the JSON of GET /jobs/{job_id};
//   - an event at each change of the row (progress, status, message);
//   - "end" with the final state, then the stream closes;
//   - ": keep-alive" comments while nothing changes, so that proxies keep
//     the connection open.
//
// Each event's id is derived from the stored state (eventID): it grows as
// the job moves on, whichever process reads it. A client reconnecting with
// Last-Event-ID gets the current state only when it is newer than the one
// it saw, and a 204 (EventSource stops reconnecting) when it already saw
// the end. A job deleted while followed ends the stream with "deleted".
//
// A process polls the rows of the jobs it streams, all of them in one query
// per interval, only while a client is connected (jobWatcher): nothing
// runs while nobody listens, and a thousand clients following the same job
// cost one query a second.

// The event stream's defaults (Config.JobEventsPoll, JobEventsHeartbeat,
// JobEventStreams).
const (
	DefaultJobEventsPoll      = time.Second
	DefaultJobEventsHeartbeat = 15 * time.Second
	DefaultJobEventStreams    = 500
)

const (
	// eventStreamType is the media type of Server-Sent Events.
	eventStreamType = "text/event-stream"
	// eventWriteTimeout bounds each write of a stream: a client that
	// stops reading is cut, while the stream as a whole has no deadline.
	eventWriteTimeout = 30 * time.Second
	// eventsRetryAfter is the Retry-After, in seconds, of a stream refused
	// because the process streams as many as it may.
	eventsRetryAfter = 5
	// eventsRetryMillis is the reconnection delay the stream tells
	// EventSource clients ("retry:").
	eventsRetryMillis = 2000
	// jobStateTimeout bounds each poll of the watched jobs.
	jobStateTimeout = 10 * time.Second
)

// eventKey is the position of a stored job state in the job's life: how
// far its status is (QUEUED, RUNNING, final), then its processed count,
// then its updated_at. A status only moves forward and, while a job runs,
// its progress is written absolute and only grows, so comparing keys orders
// states the same in every process; the status comes first so that a
// final state always follows every running one, even one whose progress
// was written higher than the final figures.
type eventKey struct {
	rank      int
	processed int64
	updated   int64 // unix microseconds
}

func jobEventKey(j *jobs.Job) eventKey {
	rank := 0
	switch {
	case j.Status.Finished():
		rank = 2
	case j.Status == jobs.JobRunning:
		rank = 1
	}
	return eventKey{rank: rank, processed: j.Processed, updated: j.UpdatedAt.UnixMicro()}
}

// String is the event id: "<rank>-<processed>-<updated_at µs>".
func (k eventKey) String() string {
	return fmt.Sprintf("%d-%d-%d", k.rank, k.processed, k.updated)
}

func (k eventKey) after(o eventKey) bool {
	if k.rank != o.rank {
		return k.rank > o.rank
	}
	if k.processed != o.processed {
		return k.processed > o.processed
	}
	return k.updated > o.updated
}

// parseEventKey reads a Last-Event-ID; ok is false for anything that is
// not an id this service made (the stream then starts from the current
// state).
func parseEventKey(s string) (eventKey, bool) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 3 {
		return eventKey{}, false
	}
	var nums [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return eventKey{}, false
		}
		nums[i] = n
	}
	if nums[0] > 2 {
		return eventKey{}, false
	}
	return eventKey{rank: int(nums[0]), processed: nums[1], updated: nums[2]}, true
}

// jobStates reads the stored state of jobs (jobs.JobStore.States).
type jobStates interface {
	States(ctx context.Context, ids []int64) ([]jobs.Job, error)
}

// jobWatcher polls the rows of the jobs this process streams and hands
// each subscriber the newest state of its job. Its loop runs only while
// someone subscribes; slots bounds the subscribers.
type jobWatcher struct {
	store    jobStates
	interval time.Duration
	log      *slog.Logger
	slots    chan struct{}

	mu      sync.Mutex
	subs    map[int64]map[*jobSub]struct{}
	running bool
	// closing holds, for each http.Server a stream was served by, a
	// channel closed when that server shuts down (streams never go idle,
	// so Shutdown would otherwise wait for them).
	closing map[*http.Server]chan struct{}
}

// jobSub is one stream's subscription: the newest state of its job (nil
// once the job is gone), latest wins.
type jobSub struct {
	id      int64
	updates chan *jobs.Job
}

func newJobWatcher(store jobStates, interval time.Duration, streams int, log *slog.Logger) *jobWatcher {
	return &jobWatcher{store: store, interval: interval, log: log, slots: make(chan struct{}, streams),
		subs: map[int64]map[*jobSub]struct{}{}, closing: map[*http.Server]chan struct{}{}}
}

// subscribe takes a stream slot and follows job id; with every slot taken,
// 429 with Retry-After. cancel ends the subscription and frees the slot.
func (w *jobWatcher) subscribe(id int64) (sub *jobSub, cancel func(), err error) {
	select {
	case w.slots <- struct{}{}:
	default:
		ae := newAPIError(http.StatusTooManyRequests, CodeRateLimited, "Too Many Requests",
			fmt.Sprintf("the server streams as many job events as it streams at once (%d); reconnect after Retry-After seconds", cap(w.slots)))
		ae.RetryAfter = eventsRetryAfter
		return nil, nil, ae
	}
	sub = &jobSub{id: id, updates: make(chan *jobs.Job, 1)}
	w.mu.Lock()
	if w.subs[id] == nil {
		w.subs[id] = map[*jobSub]struct{}{}
	}
	w.subs[id][sub] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
	w.mu.Unlock()
	return sub, func() {
		w.mu.Lock()
		delete(w.subs[id], sub)
		if len(w.subs[id]) == 0 {
			delete(w.subs, id)
		}
		w.mu.Unlock()
		<-w.slots
	}, nil
}

// streams counts the subscriptions (tests).
func (w *jobWatcher) streams() int { return len(w.slots) }

// loop polls every watched job once an interval, and stops when nobody
// watches any.
func (w *jobWatcher) loop() {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		if len(w.subs) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		ids := make([]int64, 0, len(w.subs))
		for id := range w.subs {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		w.poll(ids)
	}
}

// poll reads the watched jobs (a thousand at a time) and hands each
// subscriber its job's state; a job missing from the answer was deleted.
func (w *jobWatcher) poll(ids []int64) {
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		batch := ids[:n]
		ids = ids[n:]
		ctx, cancel := context.WithTimeout(context.Background(), jobStateTimeout)
		states, err := w.store.States(ctx, batch)
		cancel()
		if err != nil {
			w.log.Warn("job event streams: reading the jobs failed; trying again at the next interval", "error", err)
			continue
		}
		found := make(map[int64]*jobs.Job, len(states))
		for i := range states {
			found[states[i].ID] = &states[i]
		}
		w.mu.Lock()
		for _, id := range batch {
			for sub := range w.subs[id] {
				sub.offer(found[id])
			}
		}
		w.mu.Unlock()
	}
}

// offer replaces the pending state with j: a slow stream skips states,
// never falls behind.
func (s *jobSub) offer(j *jobs.Job) {
	select {
	case <-s.updates:
	default:
	}
	s.updates <- j
}

// shutdownOf returns a channel closed when srv (the server serving the
// request; nil under a test's handler) shuts down.
func (w *jobWatcher) shutdownOf(srv *http.Server) <-chan struct{} {
	if srv == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.closing[srv]
	if !ok {
		ch = make(chan struct{})
		w.closing[srv] = ch
		srv.RegisterOnShutdown(func() {
			w.mu.Lock()
			delete(w.closing, srv)
			w.mu.Unlock()
			close(ch)
		})
	}
	return ch
}

// jobEvents: GET /jobs/{job_id}/events, the job's state as Server-Sent
// Events until it ends (see the top of this file).
func (s *Server) jobEvents(c *gin.Context) error {
	ctx := c.Request.Context()
	org := principal(c).OrgID
	id, err := pathID(c, "job_id", jobs.ErrJobNotFound)
	if err != nil {
		return err
	}
	job, err := s.store.Jobs.Get(ctx, org, id)
	if err != nil {
		return err
	}
	last, resumed := parseEventKey(c.GetHeader("Last-Event-ID"))
	if resumed && job.Status.Finished() && !jobEventKey(job).after(last) {
		// The client saw the end: 204 tells EventSource to stop.
		c.Status(http.StatusNoContent)
		return nil
	}
	// A finished job's stream is its end event alone: it takes no slot.
	var sub *jobSub
	if !job.Status.Finished() {
		var cancel func()
		if sub, cancel, err = s.jobWatch.subscribe(id); err != nil {
			return err
		}
		defer cancel()
	}
	srv, _ := ctx.Value(http.ServerContextKey).(*http.Server)
	shutdown := s.jobWatch.shutdownOf(srv)

	c.Header("Content-Type", eventStreamType)
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no") // nginx: pass each event on at once
	c.Status(http.StatusOK)
	es := &eventWriter{w: bufio.NewWriterSize(c.Writer, 8<<10), rc: http.NewResponseController(c.Writer)}
	es.printf("retry: %d\n\n", eventsRetryMillis)
	if !resumed || jobEventKey(job).after(last) {
		if done, err := s.sendJobEvent(ctx, es, job); err != nil || done {
			return s.endStream(c, err)
		}
		last = jobEventKey(job)
	} else if err := es.flush(); err != nil {
		return s.endStream(c, err)
	}

	heartbeat := time.NewTicker(s.cfg.JobEventsHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-shutdown:
			// The client reconnects, with its Last-Event-ID, to a
			// process that is not going away.
			return s.endStream(c, nil)
		case <-heartbeat.C:
			// The token is checked again at each heartbeat: a stream
			// outlives no revoked or expired token by more than one
			// interval (the client's reconnection then gets its 401).
			if !s.tokenStillValid(c) {
				return s.endStream(c, nil)
			}
			es.printf(": keep-alive\n\n")
			if err := es.flush(); err != nil {
				return s.endStream(c, err)
			}
		case j := <-sub.updates:
			if j == nil { // deleted
				es.printf("event: deleted\ndata: {\"id\":%q}\n\n", models.FormatID(id))
				return s.endStream(c, es.flush())
			}
			if !jobEventKey(j).after(last) {
				continue
			}
			if done, err := s.sendJobEvent(ctx, es, j); err != nil || done {
				return s.endStream(c, err)
			}
			last = jobEventKey(j)
		}
	}
}

// tokenStillValid reports whether the request's token still validates
// for the same user and organization. A check that cannot be made now (the
// database unavailable) keeps the stream: the next heartbeat checks again.
func (s *Server) tokenStillValid(c *gin.Context) bool {
	token, ok := auth.Token(c.Request)
	if !ok || s.deps.Tokens == nil {
		return false
	}
	p, err := s.deps.Tokens.ValidateAccessToken(c.Request.Context(), token)
	if models.IsUnavailable(err) {
		return true
	}
	was := principal(c)
	return err == nil && p != nil && p.UserID == was.UserID && p.OrgID == was.OrgID
}

// sendJobEvent writes job's state as one event ("end" once it has
// finished) and flushes it; done reports that it was the last.
func (s *Server) sendJobEvent(ctx context.Context, es *eventWriter, job *jobs.Job) (done bool, err error) {
	view, err := s.fullJobView(ctx, job)
	if err != nil {
		return false, err
	}
	data, err := json.Marshal(view)
	if err != nil {
		return false, err
	}
	event := "progress"
	if job.Status.Finished() {
		event = "end"
	}
	es.printf("id: %s\nevent: %s\ndata: %s\n\n", jobEventKey(job), event, data)
	return job.Status.Finished(), es.flush()
}

// endStream ends a stream whose status is sent: an error can only be
// logged (the client sees the stream close and reconnects).
func (s *Server) endStream(c *gin.Context, err error) error {
	if err != nil && !errors.Is(err, context.Canceled) {
		logger(c).Warn("job event stream ended early", "error", err)
	}
	c.Abort()
	return nil
}

// eventWriter buffers a stream's events and sends them at each flush,
// each write with a deadline of its own: the server's write timeout (if
// one is set) cannot cut a stream that keeps being read.
type eventWriter struct {
	w  *bufio.Writer
	rc *http.ResponseController
}

// printf adds to the buffer; a write error sticks to the bufio.Writer and
// comes back from flush.
func (e *eventWriter) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(e.w, format, args...)
}

func (e *eventWriter) flush() error {
	if err := e.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := e.w.Flush(); err != nil {
		return err
	}
	return e.rc.Flush()
}
