package worker

import (
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"iam/activities"
)

// NewMetricsHandler returns the Temporal metrics handler a worker's client
// uses: the job metrics of activities (rows processed, chunk durations,
// notification deliveries, event hook attempts and their times) land in reg as Prometheus metrics; the SDK's own
// metrics are dropped. Give it to client.Options.MetricsHandler.
func NewMetricsHandler(reg prometheus.Registerer) client.MetricsHandler {
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: activities.MetricRowsProcessed + "_total",
		Help: "Entities (rows, users, accounts) job workflows processed, by module.",
	}, []string{activities.TagModule})
	chunks := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    activities.MetricChunkDuration + "_seconds",
		Help:    "Time from one recorded progress point of a job to the next, by module.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{activities.TagModule})
	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: activities.MetricDeliveries + "_total",
		Help: "Notification deliveries attempted, by outcome.",
	}, []string{activities.TagOutcome})
	hookDeliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: activities.MetricHookDeliveries + "_total",
		Help: "Event hook delivery attempts, by outcome (succeeded, retrying, failed).",
	}, []string{activities.TagOutcome})
	hookBuckets := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300}
	hookRequests := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    activities.MetricHookLatency + "_seconds",
		Help:    "Event hook requests' time, from sending to the answer read.",
		Buckets: hookBuckets,
	}, nil)
	hookCommit := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    activities.MetricHookCommitToAttempt + "_seconds",
		Help:    "Time from an audit event's commit to its event hook delivery's first attempt.",
		Buckets: hookBuckets,
	}, nil)
	reg.MustRegister(rows, chunks, deliveries, hookDeliveries, hookRequests, hookCommit)
	return metricsHandler{known: map[string]metric{
		activities.MetricRowsProcessed: {counter: rows, labels: []string{activities.TagModule}},
		activities.MetricChunkDuration: {timer: chunks, labels: []string{activities.TagModule}},
		activities.MetricDeliveries:    {counter: deliveries, labels: []string{activities.TagOutcome}},

		activities.MetricHookDeliveries:      {counter: hookDeliveries, labels: []string{activities.TagOutcome}},
		activities.MetricHookLatency:         {timer: hookRequests},
		activities.MetricHookCommitToAttempt: {timer: hookCommit},
	}}
}

// metric is one Prometheus vector and the tags that are its labels.
type metric struct {
	counter *prometheus.CounterVec
	timer   *prometheus.HistogramVec
	labels  []string
}

// metricsHandler maps the metrics it knows by name onto Prometheus vectors,
// their label values taken from the handler's tags ("" when a tag is
// absent); any other metric is dropped.
type metricsHandler struct {
	known map[string]metric
	tags  map[string]string
}

func (h metricsHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	maps.Copy(merged, h.tags)
	maps.Copy(merged, tags)
	h.tags = merged
	return h
}

func (h metricsHandler) Counter(name string) client.MetricsCounter {
	m, ok := h.known[name]
	if !ok || m.counter == nil {
		return client.MetricsNopHandler.Counter(name)
	}
	c := m.counter.WithLabelValues(h.values(m)...)
	return counterFunc(func(n int64) {
		if n > 0 {
			c.Add(float64(n))
		}
	})
}

func (h metricsHandler) Gauge(name string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge(name)
}

func (h metricsHandler) Timer(name string) client.MetricsTimer {
	m, ok := h.known[name]
	if !ok || m.timer == nil {
		return client.MetricsNopHandler.Timer(name)
	}
	o := m.timer.WithLabelValues(h.values(m)...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

func (h metricsHandler) values(m metric) []string {
	out := make([]string, len(m.labels))
	for i, name := range m.labels {
		out[i] = h.tags[name]
	}
	return out
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
