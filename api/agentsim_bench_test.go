package api_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"iam/api/apitest"
	"iam/client/agentsim"
	"iam/models/dbtest"
)

// TestAgentSim_Throughput is a rough in-process figure of unchanged
// check-ins (simulator and API in one process, on PostgreSQL): set
// IAM_AGENT_BENCH_DEVICES (e.g. 1000) to run it. The benchmark of the issue,
// cmd/agentbench, drives `iam serve` on PostgreSQL from a light generator
// (docs/benchmarks.md).
func TestAgentSim_Throughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("IAM_AGENT_BENCH_DEVICES"))
	if n == 0 {
		t.Skip("set IAM_AGENT_BENCH_DEVICES to run")
	}
	env := apitest.New(t, dbtest.Postgres(t), apitest.Options{AgentBurst: 100, AgentRate: 100, RegistrationsPerAddress: 1e6})
	st, err := agentsim.Run(t.Context(), agentsim.Config{BaseURL: env.URL, Key: installKey(t, env), Devices: n, Accounts: 5,
		Interval: time.Second, Rounds: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d devices x 5 accounts, 1 s interval, 6 rounds: %d check-ins in %s (%.0f/s incl. the first, changing, round), p50 %s, p99 %s, errors %d",
		n, st.CheckIns, st.Elapsed.Round(time.Millisecond), float64(st.CheckIns)/st.Elapsed.Seconds(),
		st.Percentile(50), st.Percentile(99), st.Errors)
	if st.Errors > 0 {
		t.Fail()
	}
}
