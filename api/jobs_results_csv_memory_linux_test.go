package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"iam/api/auth"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
	"iam/models/store"
)

// procStatusKB reads a figure in KiB (VmRSS:, VmHWM:) of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, key string) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s %q", key, rest)
			}
			return kb
		}
	}
	t.Fatalf("no %s", key)
	return 0
}

// getCSV streams a job's results as CSV from base and returns the number
// of lines and the last one.
func getCSV(t *testing.T, base string, jobID int64) (int64, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/results", base, jobID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth.Scheme+" "+apiProcessToken)
	req.Header.Set("Accept", "text/csv")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read to the end
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("CSV: %d %s", resp.StatusCode, body)
	}
	lines, last := int64(0), ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines++
		last = sc.Text()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, last
}

// TestJobResultsCSV_MillionRowsInConstantMemory streams a job of
// 1,000,000 results (written straight into job_results on PostgreSQL) as
// CSV from an API running as a process of its own: every row arrives, and
// the process's resident set grows by less than 20 MiB while it serves
// them (its peak, VmHWM, against its RSS after a warm-up export).
func TestJobResultsCSV_MillionRowsInConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a million rows: not in -short")
	}
	const n = 1_000_000
	dsn := dbtest.PostgresURL(t)
	ctx := t.Context()
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st := store.NewStore(db)
	org := &identity.Organization{Name: "CSV"}
	if err = st.Orgs.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	newJob := func(rows int) *jobs.Job {
		job := &jobs.Job{OrgID: org.ID, Kind: jobs.MgmtResolveJobKind, Module: "Management", ActionName: "Resolve", Entity: "Upload row"}
		if createErr := st.Jobs.Create(ctx, job); createErr != nil {
			t.Fatal(createErr)
		}
		if _, insertErr := db.ExecContext(ctx, `INSERT INTO job_results (job_id, seq, entity_id, status, message)
			SELECT ?, i, 'entity-' || i, 'SUCCESS', 'the row went well, nothing more to say about it' FROM generate_series(1, ?) AS i`, job.ID, rows); insertErr != nil {
			t.Fatal(insertErr)
		}
		return job
	}
	began := time.Now()
	warm, big := newJob(20_000), newJob(n)
	t.Logf("%d rows inserted in %s", n+20_000, time.Since(began).Round(time.Millisecond))

	base, pid := startAPIProcess(t, dsn, org.ID)

	if lines, _ := getCSV(t, base, warm.ID); lines != 20_001 {
		t.Fatalf("warm-up: %d lines", lines)
	}
	time.Sleep(200 * time.Millisecond)
	rss := procStatusKB(t, pid, "VmRSS:")
	began = time.Now()
	lines, last := getCSV(t, base, big.ID)
	hwm := procStatusKB(t, pid, "VmHWM:")
	growth := hwm - rss
	t.Logf("streamed %d lines in %s; API process RSS %.1f MiB after the warm-up, peak %.1f MiB: grew by %.1f MiB",
		lines, time.Since(began).Round(time.Millisecond), float64(rss)/1024, float64(hwm)/1024, float64(growth)/1024)
	if lines != n+1 || !strings.HasPrefix(last, strconv.Itoa(n)+",entity-"+strconv.Itoa(n)+",SUCCESS,") {
		t.Errorf("%d lines, last %q; want the header and %d rows", lines, last, n)
	}
	if growth >= 20<<10 {
		t.Errorf("the API process grew by %.1f MiB while streaming, want < 20 MiB", float64(growth)/1024)
	}
}
