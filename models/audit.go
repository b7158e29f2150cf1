package models

import (
	"context"
	"errors"
)

// Audit events are written with the change they record: a store method
// calls Record inside its transaction, and sqldb.InTx writes the events
// recorded during a transaction in that same transaction, just before it
// commits. A change that rolls back leaves no event; a committed change
// always has its events. Who made the change (the Origin) travels in the
// context, set once by whoever starts the work: the API for a request, the
// activities for a job, the agent channel for a device.

// Actor types.
const (
	ActorUser   = "user"
	ActorClient = "client"
	ActorDevice = "device"
	ActorSystem = "system"
)

// Outcome results.
const (
	ResultSuccess = "SUCCESS"
	ResultFailure = "FAILURE"
	ResultDenied  = "DENIED"
)

// Actor is who made a change.
type Actor struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
}

// Origin is where a change comes from: its actor, the client's address and
// user agent, the request id and, for a job's changes, the job.
type Origin struct {
	Actor     Actor
	IPAddress string
	UserAgent string
	RequestID string
	JobID     int64
}

// FieldChange is one field an update changed. For a secret (a password, a
// key, a token) Old and New stay nil and Secret says that it changed.
type FieldChange struct {
	Field  string `json:"field"`
	Old    any    `json:"old"`
	New    any    `json:"new"`
	Secret bool   `json:"secret,omitempty"`
}

// EventTarget is what an event acted on.
type EventTarget struct {
	Type        string        `json:"type"`
	ID          string        `json:"id"`
	DisplayName string        `json:"display_name"`
	Changes     []FieldChange `json:"changes,omitempty"`
}

// AuditEvent is what a store method records: the event's type and targets
// in its organization. The rest (actor, client, request, job) comes from
// the context's Origin when it is written.
type AuditEvent struct {
	OrgID   int64
	Type    string
	Targets []EventTarget
	// Result is ResultSuccess when empty; Reason says why of another.
	Result string
	Reason string
}

type originKey struct{}

type eventsKey struct{}

// WithOrigin returns ctx carrying o: the events recorded under it name o's
// actor, client, request and job.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// SystemActor is the actor of changes nobody asked for (schedules, the
// reconciler) and of a context without an Origin.
var SystemActor = Actor{Type: ActorSystem, ID: "system", DisplayName: "System"}

// OriginOf returns the Origin ctx carries; without one, the system.
func OriginOf(ctx context.Context) Origin {
	if o, ok := ctx.Value(originKey{}).(Origin); ok {
		return o
	}
	return Origin{Actor: SystemActor}
}

// PendingEvents collects the events of one transaction until it commits.
type PendingEvents struct{ events []AuditEvent }

// Events returns the events recorded so far, in order.
func (p *PendingEvents) Events() []AuditEvent { return p.events }

// Add appends events recorded in a nested transaction that committed.
func (p *PendingEvents) Add(events ...AuditEvent) { p.events = append(p.events, events...) }

// WithPendingEvents returns ctx collecting the events Record adds into a
// new PendingEvents, for the transaction helper.
func WithPendingEvents(ctx context.Context) (context.Context, *PendingEvents) {
	p := &PendingEvents{}
	return context.WithValue(ctx, eventsKey{}, p), p
}

// ErrNoTransaction is the error of Record outside a transaction of the
// transaction helper: a change whose event cannot be written with it must
// not happen.
var ErrNoTransaction = errors.New("audit: an event recorded outside a transaction")

// Record adds ev to the events of the transaction ctx belongs to
// (sqldb.InTx's). ErrNoTransaction outside one.
func Record(ctx context.Context, ev AuditEvent) error {
	p, ok := ctx.Value(eventsKey{}).(*PendingEvents)
	if !ok {
		return ErrNoTransaction
	}
	p.events = append(p.events, ev)
	return nil
}

// EventRecord is an audit event as it is stored and shown: the JSON
// document written once with the change (its canonical form, whose SHA-256
// the digests seal) and answered by the API as it is.
type EventRecord struct {
	ID        string        `json:"id"`
	OrgID     string        `json:"org_id"`
	Sequence  int64         `json:"sequence"`
	Published string        `json:"published"`
	EventType string        `json:"event_type"`
	Actor     Actor         `json:"actor"`
	Client    EventClient   `json:"client"`
	RequestID string        `json:"request_id"`
	Outcome   EventOutcome  `json:"outcome"`
	Targets   []EventTarget `json:"targets"`
	JobID     *string       `json:"job_id"`
}

// EventClient is the client a change came from.
type EventClient struct {
	IPAddress string `json:"ip_address"`
	UserAgent string `json:"user_agent"`
}

// EventOutcome is how a change or a refusal ended.
type EventOutcome struct {
	Result string `json:"result"`
	Reason string `json:"reason"`
}
