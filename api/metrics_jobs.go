package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"iam/models/jobs"
	"iam/models/store"
)

// jobsCollectorTTL is how long a count of the jobs serves scrapes before
// the database is asked again.
const jobsCollectorTTL = 15 * time.Second

// jobsCollector serves iam_jobs{module,status}: the jobs of every
// organization by module and status, counted in the database at most once
// per jobsCollectorTTL whatever the scrape rate. A failed count serves the
// last one (or nothing) and is logged.
type jobsCollector struct {
	store *store.Store
	log   *slog.Logger
	desc  *prometheus.Desc

	mu     sync.Mutex
	at     time.Time
	counts []jobs.JobCount
}

func newJobsCollector(store *store.Store, log *slog.Logger) *jobsCollector {
	return &jobsCollector{store: store, log: log, desc: prometheus.NewDesc("iam_jobs",
		"Jobs of every organization by module and status.", []string{"module", "status"}, nil)}
}

func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= jobsCollectorTTL {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		counts, err := c.store.Jobs.CountByModuleStatus(ctx)
		cancel()
		if err != nil {
			c.log.Warn("metrics: cannot count the jobs", "error", err)
		} else {
			c.at, c.counts = time.Now(), counts
		}
	}
	for _, n := range c.counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Count), n.Module, string(n.Status))
	}
}
