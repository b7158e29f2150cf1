// Package workflows holds the service's Temporal workflows: deterministic
// orchestration only. Every I/O step is an activity of package activities.
//
// Each bulk operation is a job (see models.Job): its workflow has id
// "job-<job id>", takes a JobInput, marks the job RUNNING, works through its
// entities in chunks, records absolute progress after each chunk, and finishes
// the job row. The names, task queue, search attributes and query names live
// in names.go so that callers and the worker agree on them.
package workflows
