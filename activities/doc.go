// Package activities holds the Temporal activities: the only code that does
// I/O inside jobs. There is one struct per area, holding its dependencies;
// workflows refer to its methods for their signatures only.
//
// A retried activity must leave the same state as one that ran once: writes
// are upserts keyed by job and row, and progress is always absolute.
package activities
