// Package models holds the service's entities, the store that reads and writes
// them, the embedded schema migrations and the domain errors.
//
// Every store method takes the caller's organization id and never returns a row
// of another organization. Public store methods own their transaction; helpers
// take a bun.IDB so that they can run inside one. The Store (NewStore) is the
// only door to the database: callers reach every area through its fields.
//
// What differs between PostgreSQL and SQLite lives behind Dialect, one
// file per dialect (dialect_pg.go, dialect_sqlite.go); store code asks it
// instead of branching on the database. Passwords and the secret box are in
// models/secret.
package models
