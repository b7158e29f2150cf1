// Package models holds the service's entities, the store that reads and writes
// them, the embedded schema migrations and the domain errors.
//
// Every store method takes the caller's organization id and never returns a row
// of another organization. Public store methods own their transaction; helpers
// take a bun.IDB so that they can run inside one.
package models
