package api

import (
	"testing"
	"time"

	"iam/models/jobs"
)

// Event ids order a job's states as its life goes: the status first (a
// final state follows every running one, even one that recorded more
// rows than the final figures), then the rows processed, then the time of
// the write; an id reads back as the key it was made from; anything else
// is no id.
func TestEventKey_OrdersAJobsStates(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	state := func(status jobs.JobStatus, processed int64, at time.Duration) eventKey {
		return jobEventKey(&jobs.Job{Status: status, Processed: processed, UpdatedAt: t0.Add(at)})
	}
	life := []eventKey{
		state(jobs.JobQueued, 0, 0),
		state(jobs.JobRunning, 0, time.Millisecond),
		state(jobs.JobRunning, 500, 2*time.Millisecond),
		state(jobs.JobRunning, 500, 3*time.Millisecond), // same rows, another write (total or message)
		state(jobs.JobRunning, 1000, time.Millisecond),  // another worker's clock behind
		state(jobs.JobError, 700, 5*time.Millisecond),   // ended below the rows recorded
	}
	for i := 1; i < len(life); i++ {
		if !life[i].after(life[i-1]) || life[i-1].after(life[i]) {
			t.Errorf("state %d (%s) does not follow state %d (%s)", i, life[i], i-1, life[i-1])
		}
		if life[i].after(life[i]) {
			t.Errorf("%s is after itself", life[i])
		}
	}
	for _, k := range life {
		if back, ok := parseEventKey(k.String()); !ok || back != k {
			t.Errorf("parseEventKey(%q) = %+v, %v", k.String(), back, ok)
		}
	}
	for _, bad := range []string{"", "1-2", "1-2-3-4", "3-0-0", "a-1-2", "-1-2-3", "1--2-3", "1-2-x"} {
		if k, ok := parseEventKey(bad); ok {
			t.Errorf("parseEventKey(%q) = %+v, want no id", bad, k)
		}
	}
}
