// Package audit is the audit log area: reading the events every change
// writes with it (sqldb.InTx writes them; models.Record is how a store
// method records one), tailing them in commit order, sealing them into
// signed digests that chain, verifying the chain and the events, and
// deleting events past their retention. docs/audit.md is the catalogue.
package audit
