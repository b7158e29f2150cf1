package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"iam/api"
	"iam/api/auth"
	"iam/models"
	"iam/models/sqldb"
	"iam/models/store"
)

// An API process of its own, as `iam serve` is, for the tests that need
// one (the CSV export's memory, event streams across replicas): this test
// binary run again as TestJobsAPIProcess, serving the API over the
// database its environment names, with one token: a job reader of one
// organization.
const (
	envAPIProcessDSN  = "IAM_TEST_API_PROCESS_DSN"
	envAPIProcessOrg  = "IAM_TEST_API_PROCESS_ORG"
	envAPIProcessPoll = "IAM_TEST_API_PROCESS_POLL"
	apiProcessToken   = "api-process-token" //nolint:gosec // G101: a test token the child process accepts, nothing secret
)

// fixedToken accepts one token, of a job reader of org.
type fixedToken struct{ org int64 }

func (f fixedToken) ValidateAccessToken(_ context.Context, tok string) (*auth.Principal, error) {
	if tok != apiProcessToken {
		return nil, errors.New("unknown token")
	}
	return &auth.Principal{UserID: 1, OrgID: f.org, Scopes: []string{"svc.job.READ"}}, nil
}

// TestJobsAPIProcess is the API process of startAPIProcess; run by hand it
// skips.
func TestJobsAPIProcess(t *testing.T) {
	dsn := os.Getenv(envAPIProcessDSN)
	if dsn == "" {
		t.Skip("the API process of the jobs tests (startAPIProcess)")
	}
	org, err := strconv.ParseInt(os.Getenv(envAPIProcessOrg), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	poll, _ := time.ParseDuration(os.Getenv(envAPIProcessPoll)) // zero: the default
	db, err := sqldb.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{JobEventsPoll: poll}, api.Deps{Store: store.NewStore(db), Tokens: fixedToken{org}, Log: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	_ = hs.Serve(api.Listener(ln)) // until the parent kills the process
}

// startAPIProcess starts an API process over dsn whose token
// (apiProcessToken) reads org's jobs, and returns its base URL and pid.
// extra adds to its environment (envAPIProcessPoll).
func startAPIProcess(t *testing.T, dsn string, org int64, extra ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestJobsAPIProcess$", "-test.count=1") //nolint:gosec // G204: this test binary, with fixed arguments
	cmd.Env = append(os.Environ(), envAPIProcessDSN+"="+dsn, envAPIProcessOrg+"="+models.FormatID(org))
	cmd.Env = append(cmd.Env, extra...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("the API process said %q: %v", line, err)
	}
	return "http://" + addr, cmd.Process.Pid
}
