package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"iam/activities"
	"iam/api/apitest"
	"iam/api/auth"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
)

// sseEvent is one Server-Sent Event as a client reads it.
type sseEvent struct {
	ID, Event, Data string
}

// sseStream is an open GET /jobs/{id}/events.
type sseStream struct {
	resp *http.Response
	r    *bufio.Reader
	raw  bytes.Buffer // everything read, for the contract check
	req  *http.Request
}

// openEvents opens the job's event stream, with Last-Event-ID when
// lastID is not empty.
func openEvents(t *testing.T, env *apitest.Env, tok string, jobID int64, lastID string) *sseStream {
	t.Helper()
	return openEventsAt(t, t.Context(), env.URL, tok, jobID, lastID)
}

// openEventsAt opens the event stream of the API at base.
func openEventsAt(t *testing.T, ctx context.Context, base, tok string, jobID int64, lastID string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/events", base, jobID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth.Scheme+" "+tok)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the stream's body is closed by sseStream.close
	if err != nil {
		t.Fatal(err)
	}
	s := &sseStream{resp: resp, req: req}
	s.r = bufio.NewReader(io.TeeReader(resp.Body, &s.raw))
	return s
}

// next reads the next event (comments and retry lines skipped); io.EOF
// when the server closed the stream.
func (s *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.Event != "" || ev.Data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[len("id: "):]
		case strings.HasPrefix(line, "event: "):
			ev.Event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[len("data: "):]
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

func (s *sseStream) close() { _ = s.resp.Body.Close() } // a stream read in part: only the connection goes

// check checks what was read against the OpenAPI document.
func (s *sseStream) check(t *testing.T) {
	t.Helper()
	apitest.CheckResponse(t, s.req, s.resp, s.raw.Bytes())
}

// idKey orders event ids as the service makes them: status rank,
// processed, updated_at.
func idKey(t *testing.T, id string) [3]int64 {
	t.Helper()
	parts := strings.Split(id, "-")
	if len(parts) != 3 {
		t.Fatalf("event id %q is not <rank>-<processed>-<updated>", id)
	}
	var k [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			t.Fatalf("event id %q: %v", id, err)
		}
		k[i] = n
	}
	return k
}

func keyAfter(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// eventFollower reads a job's events across connections, checking that
// ids and progress only grow and that "end" comes last, with the final
// state.
type eventFollower struct {
	t       *testing.T
	jobID   int64
	seen    []jobBody
	lastKey [3]int64
}

// follow reads s until it closes, or until stopAfter events when
// stopAfter is positive; it returns the last event's id and whether it was
// the end.
func (f *eventFollower) follow(s *sseStream, stopAfter int) (lastID string, ended bool) {
	t := f.t
	t.Helper()
	for n := 0; ; n++ {
		if stopAfter > 0 && n == stopAfter {
			return lastID, false
		}
		ev, err := s.next()
		if errors.Is(err, io.EOF) {
			return lastID, ended
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		if ended {
			t.Fatalf("an event after the end: %+v", ev)
		}
		k := idKey(t, ev.ID)
		if !keyAfter(k, f.lastKey) {
			t.Errorf("event id %s does not follow the previous one %v", ev.ID, f.lastKey)
		}
		f.lastKey, lastID = k, ev.ID
		var j jobBody
		if err := json.Unmarshal([]byte(ev.Data), &j); err != nil {
			t.Fatalf("event data %s: %v", ev.Data, err)
		}
		if j.ID != strconv.FormatInt(f.jobID, 10) {
			t.Errorf("event of job %s, want %d", j.ID, f.jobID)
		}
		if len(f.seen) > 0 && j.Progress.Processed < f.seen[len(f.seen)-1].Progress.Processed {
			t.Errorf("progress went back from %d to %d", f.seen[len(f.seen)-1].Progress.Processed, j.Progress.Processed)
		}
		f.seen = append(f.seen, j)
		final := jobs.JobStatus(j.Status).Finished()
		if (ev.Event == "end") != final {
			t.Errorf("event %q with status %s", ev.Event, j.Status)
		}
		ended = final
	}
}

// TestJobEvents_FollowsEnrollmentAndResumes follows a real enrollment job
// (3,000 rows in chunks of 100 through the workflow engine): the stream
// starts with the job's state, each event's progress and id only grow;
// the client drops the connection after the first events and reconnects
// with Last-Event-ID, getting only newer states, until "end" with the
// final state closes the stream. Reconnecting after the end answers 204.
func TestJobEvents_FollowsEnrollmentAndResumes(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{Temporal: true, JobEventsPoll: 20 * time.Millisecond, JobEventsHeartbeat: 100 * time.Millisecond})
		const rows = 3000
		seedUsers(t, db, env.Org, rows)
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE", "svc.job.READ")
		var b strings.Builder
		b.WriteString("Primary Email,Email Address\n")
		for i := 1; i <= rows; i++ {
			fmt.Fprintf(&b, "user%d@example.com,otp%d@example.com\n", i, i)
		}
		jobID := uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}, {"chunk_rows", "100"}}, b.String())

		f := &eventFollower{t: t, jobID: jobID}
		follow := f.follow
		first := openEvents(t, env, tok, jobID, "")
		if first.resp.StatusCode != http.StatusOK || !strings.HasPrefix(first.resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("GET events: %d %s", first.resp.StatusCode, first.resp.Header.Get("Content-Type"))
		}
		lastID, ended := follow(first, 2)
		first.close()
		if ended {
			t.Fatalf("the job ended within the first two events (%d events); the test needs a longer job", len(f.seen))
		}
		beforeResume := len(f.seen)

		resumed := openEvents(t, env, tok, jobID, lastID)
		lastID, ended = follow(resumed, 0)
		resumed.close()
		resumed.check(t)
		if !ended {
			t.Fatalf("the resumed stream closed before the end (%d events)", len(f.seen))
		}
		t.Logf("%d events before the reconnection, %d after", beforeResume, len(f.seen)-beforeResume)
		if len(f.seen) < beforeResume+2 {
			t.Errorf("%d events after resuming, want progress and the end", len(f.seen)-beforeResume)
		}
		end := f.seen[len(f.seen)-1]
		if end.Status != string(jobs.JobCompleted) || end.Progress.Processed != rows || end.Details.SuccessCount != rows || end.EndTime == nil {
			t.Errorf("final event: %s %d/%d, %d ok", end.Status, end.Progress.Processed, end.Progress.Total, end.Details.SuccessCount)
		}
		var got jobBody
		env.Get(fmt.Sprintf("/api/v1/jobs/%d", jobID), tok).JSON(t, &got)
		if got.Status != end.Status || got.Progress != end.Progress || got.Details.ResultCount != end.Details.ResultCount {
			t.Errorf("the end event %+v is not GET /jobs/{id} %+v", end, got)
		}

		again := openEvents(t, env, tok, jobID, lastID)
		again.close()
		if again.resp.StatusCode != http.StatusNoContent {
			t.Errorf("reconnecting after the end: %d, want 204", again.resp.StatusCode)
		}
		// Without Last-Event-ID a finished job's stream is its end event.
		fresh := openEvents(t, env, tok, jobID, "")
		ev, err := fresh.next()
		if err != nil || ev.Event != "end" || ev.ID != lastID {
			t.Errorf("a finished job's stream: %+v %v, want end %s", ev, err, lastID)
		}
		if _, err := fresh.next(); !errors.Is(err, io.EOF) {
			t.Errorf("after the end: %v, want the stream closed", err)
		}
		fresh.close()
		fresh.check(t)
	})
}

// TestJobEvents_TenancyScopesBoundAndDelete: another organization's job is
// 404 and a token without svc.job.READ/ALL 403; past the process's bound
// a stream is 429 with Retry-After; a quiet stream sends heartbeats; a
// job deleted while followed ends its stream with "deleted"; once nobody
// listens the process stops polling.
func TestJobEvents_TenancyScopesBoundAndDelete(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{JobEventsPoll: 20 * time.Millisecond, JobEventsHeartbeat: 50 * time.Millisecond, JobEventStreams: 1})
		job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 3}) // QUEUED: nothing runs it
		tok := env.Token(env.Org, "svc.job.ALL")
		path := fmt.Sprintf("/api/v1/jobs/%d/events", job.ID)

		other := env.NewOrg("Other")
		wantError(t, env.Get(path, env.Token(other, "svc.job.READ")), 404, "00000103", "does not exist")
		wantError(t, env.Get(path, env.Token(env.Org, "svc.user.READ", "svc.job.DELETE")), 403, "00000102", "")
		wantError(t, env.Get("/api/v1/jobs/123/events", tok), 404, "00000103", "does not exist")

		s := openEvents(t, env, tok, job.ID, "")
		ev, err := s.next()
		if err != nil || ev.Event != "progress" || !strings.Contains(ev.Data, `"status":"QUEUED"`) {
			t.Fatalf("first event %+v %v", ev, err)
		}
		busy := env.Get(path, tok)
		wantError(t, busy, 429, "00000112", "")
		if busy.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		// A finished job's stream is its end event alone, which takes no
		// slot: it is served with every slot taken.
		done := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 3})
		if finishErr := env.Store.Jobs.Finish(t.Context(), env.Org.ID, done.ID, jobs.JobError, "stopped", jobs.JobProgress{}); finishErr != nil {
			t.Fatal(finishErr)
		}
		ended := openEvents(t, env, tok, done.ID, "")
		if endEv, endErr := ended.next(); endErr != nil || endEv.Event != "end" || !strings.Contains(endEv.Data, `"status":"ERROR"`) {
			t.Errorf("a finished job's stream with every slot taken: %d %+v %v", ended.resp.StatusCode, endEv, endErr)
		}
		ended.close()
		// Heartbeats while the job stays QUEUED.
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(s.raw.String(), ": keep-alive") {
			if time.Now().After(deadline) {
				t.Fatal("no heartbeat comment")
			}
			if _, readErr := s.r.ReadString('\n'); readErr != nil {
				t.Fatal(readErr)
			}
		}
		if resp := env.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/v1/jobs/%d", job.ID), Token: tok}); resp.Status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", resp.Status, resp.Body)
		}
		ev, err = s.next()
		if err != nil || ev.Event != "deleted" || ev.Data != fmt.Sprintf(`{"id":"%d"}`, job.ID) {
			t.Fatalf("after the delete: %+v %v", ev, err)
		}
		if _, err := s.next(); !errors.Is(err, io.EOF) {
			t.Errorf("after deleted: %v, want the stream closed", err)
		}
		s.close()
		s.check(t)

		// The slot is free again, and with nobody listening no poll runs.
		job2 := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 3})
		ctx, cancel := context.WithCancel(t.Context())
		s2 := openEventsAt(t, ctx, env.URL, tok, job2.ID, "")
		if s2.resp.StatusCode != http.StatusOK {
			t.Fatalf("after the first stream ended: %d", s2.resp.StatusCode)
		}
		if !env.Server.JobEventsPolling() {
			t.Error("no poll runs while a client listens")
		}
		cancel()
		s2.close()
		deadline = time.Now().Add(5 * time.Second)
		for env.Server.JobEventsPolling() || env.Server.JobEventStreams() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("still polling (%d streams) with nobody listening", env.Server.JobEventStreams())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestJobEvents_OutlivesWriteTimeoutAndEndsOnShutdown: behind an
// http.Server with a WriteTimeout far shorter than the stream, the stream
// goes on (each write sets its own deadline) and still delivers progress;
// the server's Shutdown closes it at once rather than waiting on it.
func TestJobEvents_OutlivesWriteTimeoutAndEndsOnShutdown(t *testing.T) {
	db := dbtest.SQLite(t)
	env := apitest.New(t, db, apitest.Options{JobEventsPoll: 20 * time.Millisecond, JobEventsHeartbeat: 50 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: env.Server.Handler(), ReadHeaderTimeout: time.Second, WriteTimeout: 300 * time.Millisecond}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	ctx := t.Context()
	job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 3})
	s := openEventsAt(t, ctx, "http://"+ln.Addr().String(), env.Token(env.Org, "svc.job.READ"), job.ID, "")
	defer s.close()
	if ev, err := s.next(); err != nil || ev.Event != "progress" {
		t.Fatalf("first event %+v %v", ev, err)
	}
	began := time.Now()
	for time.Since(began) < 1200*time.Millisecond { // four write timeouts
		if _, err := s.r.ReadString('\n'); err != nil {
			t.Fatalf("the stream ended after %s (the server's WriteTimeout is 300 ms): %v", time.Since(began), err)
		}
	}
	if _, err := env.Store.Jobs.Start(ctx, env.Org.ID, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.Jobs.RecordChunk(ctx, env.Org.ID, job.ID, nil, jobs.JobProgress{Processed: 2, Total: 3, Success: 2}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("waiting for progress: %v", err)
		}
		if strings.Contains(ev.Data, `"processed":2`) {
			break
		}
	}

	shutCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	began = time.Now()
	if err := hs.Shutdown(shutCtx); err != nil {
		t.Fatalf("Shutdown with a stream open: %v after %s", err, time.Since(began))
	}
	if _, err := io.ReadAll(s.r); err != nil {
		t.Errorf("the stream did not end cleanly at shutdown: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("Shutdown took %s with a stream open", took)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}

// TestJobEvents_EndsWhenTheTokenIsRevoked: the token is checked again at
// each heartbeat, so a stream does not outlive the revocation of the token
// that opened it, and reconnecting with it is refused.
func TestJobEvents_EndsWhenTheTokenIsRevoked(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{JobEventsPoll: 20 * time.Millisecond, JobEventsHeartbeat: 50 * time.Millisecond})
		job := env.CreateDiagnostic(env.Org, activities.DiagnosticParams{Items: 3}) // QUEUED: nothing runs it
		tok := env.Token(env.Org, "svc.job.READ")
		s := openEvents(t, env, tok, job.ID, "")
		if ev, err := s.next(); err != nil || ev.Event != "progress" {
			t.Fatalf("first event %+v %v", ev, err)
		}
		env.Tokens.Revoke(tok)
		done := make(chan error, 1)
		go func() {
			for {
				if _, err := s.r.ReadString('\n'); err != nil {
					done <- err
					return
				}
			}
		}()
		select {
		case err := <-done:
			if !errors.Is(err, io.EOF) {
				t.Errorf("the stream ended with %v, want its end (EOF)", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the stream goes on after its token was revoked")
		}
		s.close()
		wantError(t, env.Get(fmt.Sprintf("/api/v1/jobs/%d/events", job.ID), tok), 401, "00000101", "")
	})
}
