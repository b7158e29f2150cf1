// Package jobs is the jobs area: the job rows that are the truth for
// /jobs, their per-row results, the blob store that keeps uploaded files
// until their job ends, and the idempotency keys of the requests that start
// jobs. Other areas hook into a job's end through JobStore.OnEnd.
package jobs
