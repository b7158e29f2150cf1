package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"iam/cmd/internal/benchrun"
)

// result is one measured run of one build.
type result struct {
	build                   string
	requests                int
	elapsed                 time.Duration
	lat                     []time.Duration // every request's, sorted
	kinds                   [numReqs][]time.Duration
	serveCPU, pgCPU, genCPU time.Duration
}

func newResult(build string, smp *sample, elapsed time.Duration) *result {
	r := &result{build: build, elapsed: elapsed, kinds: smp.lat}
	for k := range r.kinds {
		slices.Sort(r.kinds[k])
		r.lat = append(r.lat, r.kinds[k]...)
	}
	slices.Sort(r.lat)
	r.requests = len(r.lat)
	return r
}

func (r *result) perSecond() float64 { return float64(r.requests) / r.elapsed.Seconds() }
func (r *result) p50() time.Duration { return benchrun.Percentile(r.lat, 50) }
func (r *result) p99() time.Duration { return benchrun.Percentile(r.lat, 99) }

// perRequest is CPU time per request, in µs.
func (r *result) perRequest(cpu time.Duration) float64 {
	return float64(cpu.Microseconds()) / float64(max(r.requests, 1))
}

func (r *result) line() string {
	return fmt.Sprintf("%d requests in %.1f s: %.0f/s, p50 %.2f ms, p99 %.2f ms; CPU per request: serve %.0f µs, PostgreSQL %.0f µs (generator %.1f s in all)",
		r.requests, r.elapsed.Seconds(), r.perSecond(), ms(r.p50()), ms(r.p99()), r.perRequest(r.serveCPU), r.perRequest(r.pgCPU), r.genCPU.Seconds())
}

// byKind is each kind's count, p50 and p99.
func (r *result) byKind() string {
	parts := make([]string, 0, numReqs)
	for k, lat := range r.kinds {
		parts = append(parts, fmt.Sprintf("%s %d p50 %.1f p99 %.1f", reqKind(k), len(lat),
			ms(benchrun.Percentile(lat, 50)), ms(benchrun.Percentile(lat, 99))))
	}
	return strings.Join(parts, "; ") + " (ms)"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// turn is both builds' runs of one turn.
type turn struct{ before, after *result }

// throughput is after's requests/s over before's.
func (t turn) throughput() float64 { return t.after.perSecond() / t.before.perSecond() }

// p99 is after's p99 over before's.
func (t turn) p99() float64 { return float64(t.after.p99()) / float64(t.before.p99()) }

func (t turn) ratios() string {
	return fmt.Sprintf("after/before throughput %.3f (target ≥ %.2f: %s), p99 %.3f (target ≤ %.1f: %s)",
		t.throughput(), throughputTarget, verdict(t.throughput() >= throughputTarget),
		t.p99(), p99Target, verdict(t.p99() <= p99Target))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// figures are the columns of the report, for one build's run.
type figures struct {
	perSecond, p50, p99, serveCPU, pgCPU float64
}

func (r *result) figures() figures {
	return figures{r.perSecond(), ms(r.p50()), ms(r.p99()), r.perRequest(r.serveCPU), r.perRequest(r.pgCPU)}
}

// medianFigures is the median of each column over runs.
func medianFigures(fs []figures) figures {
	col := func(get func(figures) float64) float64 {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = get(f)
		}
		return benchrun.Median(xs)
	}
	return figures{
		perSecond: col(func(f figures) float64 { return f.perSecond }),
		p50:       col(func(f figures) float64 { return f.p50 }),
		p99:       col(func(f figures) float64 { return f.p99 }),
		serveCPU:  col(func(f figures) float64 { return f.serveCPU }),
		pgCPU:     col(func(f figures) float64 { return f.pgCPU }),
	}
}

// report prints the table of every turn and the medians.
func report(out *benchrun.Report, cfg config, builds []*build, turns []turn, loadStart, loadEnd string) {
	out.Printf("mixed CRUD load on PostgreSQL: %d clients in a closed loop, %v per build and turn, %d turns; %s;\n",
		cfg.clients, cfg.duration, len(turns), cfg.mix)
	out.Printf("each run on a fresh database seeded with %d users and %d groups through the API\n", cfg.users, cfg.groups)
	for _, bd := range builds {
		out.Printf("  %-6s %s\n", bd.name, bd.from)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "turn\tbuild\treq/s\tp50 ms\tp99 ms\tserve µs/req\tpg µs/req\tthroughput a/b\tp99 a/b\t")
	row := func(name, build string, f figures, ratios string) {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%s\t\n", name, build, f.perSecond, f.p50, f.p99, f.serveCPU, f.pgCPU, ratios)
	}
	var befores, afters []figures
	var tput, p99 []float64
	for i, t := range turns {
		first := "before"
		if i%2 == 1 {
			first = "after"
		}
		name := fmt.Sprintf("%d (%s first)", i+1, first)
		row(name, "before", t.before.figures(), "\t")
		row("", "after", t.after.figures(), fmt.Sprintf("%.3f\t%.3f", t.throughput(), t.p99()))
		befores, afters = append(befores, t.before.figures()), append(afters, t.after.figures())
		tput, p99 = append(tput, t.throughput()), append(p99, t.p99())
	}
	mt, mp := benchrun.Median(tput), benchrun.Median(p99)
	row("median", "before", medianFigures(befores), "\t")
	row("", "after", medianFigures(afters), fmt.Sprintf("%.3f\t%.3f", mt, mp))
	_ = tw.Flush() // out keeps the first failed write (tabwriter writes to it), and run returns it
	out.Printf("(a/b: after over before within each turn; the median row's ratios are the medians of the turns' ratios)\n")
	out.Printf("targets: throughput ≥ %.2f of before: %s (%.3f); p99 ≤ %.1f× before: %s (%.3f)\n",
		throughputTarget, verdict(mt >= throughputTarget), mt, p99Target, verdict(mp <= p99Target), mp)
	out.Printf("load average at the start %s, at the end %s\n", loadStart, loadEnd)
}
