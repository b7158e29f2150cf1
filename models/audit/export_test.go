package audit

import "time"

// SetClock makes now the clock of r's buckets.
func (r *Refusals) SetClock(now func() time.Time) { r.now = now }
