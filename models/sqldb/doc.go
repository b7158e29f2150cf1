// Package sqldb opens the database (PostgreSQL, or the embedded SQLite
// file), runs its transactions with the retry of a rolled-back one, holds
// the primitives whose SQL differs between the two (Dialect: row locks, the
// clock, the write queue) and the one ordered set of schema migrations. It
// also makes the ids rows get before insert (NewID), from a node leased in
// the database. It imports no area.
package sqldb
