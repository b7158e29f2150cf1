package benchrun

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
)

// StatementsConfig is the PostgreSQL configuration ResetStatements and
// PrintStatements need, for a benchmark's throwaway cluster: the
// extension loaded, and planning timed beside execution (a statement whose
// values are formatted into its text is planned on every call).
const StatementsConfig = `
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track_planning = on
`

// ResetStatements makes sure pg_stat_statements is there (the cluster
// loads it: StatementsConfig) and empties its counts.
func ResetStatements(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// ownStatements are the counted statements of the current database, but
// for pg_stat_statements' own.
const ownStatements = `FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND query NOT LIKE '%pg_stat_statements%'`

// spaces are runs of white space, printed as one.
var spaces = regexp.MustCompile(`\s+`)

// PrintStatements prints the limit statements of db's database that took
// the most time (execution and planning) since ResetStatements: calls and
// time per operation (ops, the run's requests or check-ins; 0 prints
// totals), and execution and planning time per call. A failed read is
// printed, not returned: the figures of the run stand without it.
func PrintStatements(ctx context.Context, db *sql.DB, out *Report, limit, ops int) {
	per, unit := float64(max(ops, 1)), "op"
	if ops <= 0 {
		unit = "run"
	}
	var calls int64
	var total float64
	if err := db.QueryRowContext(ctx, `SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time + total_plan_time), 0) `+
		ownStatements).Scan(&calls, &total); err != nil {
		out.Printf("  pg_stat_statements: %v\n", err)
		return
	}
	out.Printf("  statements: %.2f per %s, %.0f µs of database time per %s (execution and planning)\n",
		float64(calls)/per, unit, total*1000/per, unit)
	rows, err := db.QueryContext(ctx, `SELECT calls, total_exec_time, total_plan_time, query `+ownStatements+
		` ORDER BY total_exec_time + total_plan_time DESC LIMIT $1`, limit)
	if err != nil {
		out.Printf("  pg_stat_statements: %v\n", err)
		return
	}
	defer func() { _ = rows.Close() }() // rows.Err reports the read's errors
	out.Printf("  %9s %9s %9s %9s  statement\n", "per "+unit, "µs/"+unit, "exec µs", "plan µs")
	for rows.Next() {
		var c int64
		var exec, plan float64
		var q string
		if err := rows.Scan(&c, &exec, &plan, &q); err != nil {
			out.Printf("  pg_stat_statements: %v\n", err)
			return
		}
		q = strings.TrimSpace(spaces.ReplaceAllString(q, " "))
		if len(q) > 150 {
			q = q[:150] + "…"
		}
		n := float64(max(c, 1))
		out.Printf("  %9.3f %9.1f %9.1f %9.1f  %s\n", float64(c)/per, (exec+plan)*1000/per, exec*1000/n, plan*1000/n, q)
	}
	if err := rows.Err(); err != nil {
		out.Printf("  pg_stat_statements: %v\n", err)
	}
}
