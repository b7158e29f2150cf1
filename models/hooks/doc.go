// Package hooks is the area of event hooks: an organization's HTTPS
// endpoints that receive its audit events, signed per the Standard Webhooks
// specification (docs/event-hooks.md). It owns the hooks (their URL, the
// event types they name, their sealed signing secrets) and their
// deliveries: one row per hook and event, made from the organization's
// committed audit events by following them in sequence order (Dispatch),
// with every attempt recorded on it.
//
// Deliveries are derived from committed events only: the dispatcher reads
// audit_events, which hold only committed changes, in seq order (gap-free,
// commit order), and advances the hook's cursor in the transaction that
// inserts the deliveries, so every committed event matching a hook becomes
// exactly one delivery and a rolled-back change never does.
package hooks
