package benchrun

import (
	"context"

	"iam/models/dbtest/pgcluster"
)

// Postgres returns the PostgreSQL database a benchmark runs on:
// IAM_BENCH_DATABASE_URL as getenv gives it, or else the postgres database
// of a throwaway cluster started with opts (said in the report). stop
// stops that cluster (and does nothing for a database given): defer it with
// Cleanup.
func Postgres(ctx context.Context, getenv func(string) string, opts pgcluster.Options, out *Report) (dsn string, stop func() error, err error) {
	if dsn = getenv("IAM_BENCH_DATABASE_URL"); dsn != "" {
		return dsn, func() error { return nil }, nil
	}
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return "", nil, err
	}
	out.Printf("throwaway PostgreSQL cluster %s\n", c.Describe())
	return c.URL("postgres").String(), c.Stop, nil
}
