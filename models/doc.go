// Package models is the bottom of the service's data layer: the domain
// errors every area returns (Error, codes, ErrorCode), the classification of
// transient database errors (IsUnavailable), ids as the API shows them
// (FormatID, ParseID) and checks shared by the areas (Problems, OneOf).
//
// Each area is a package below it (models/identity, models/jobs, ...; see
// docs/architecture.md): it owns its entities, store methods, validation,
// listing schema and dialect-specific SQL, and imports only models,
// models/sqldb and the areas below it. models/store composes them into the
// one Store. Every store method takes the caller's organization id and never
// returns a row of another organization; public store methods own their
// transaction, helpers take a bun.IDB so that they can run inside one.
package models
