// Package store composes every area of models into one Store, the only
// door to the database: it opens each area's store over the same handle
// and wires the hooks through which an area acts on another's changes
// (UserStore.BeforeDelete, JobStore.OnEnd).
package store
