package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/client"

	"iam/api/apitest"
	"iam/api/jobrun"
	"iam/models"
	"iam/models/dbtest"
	"iam/models/enrollment"
	"iam/models/jobs"
)

// A client that goes away in the middle of the file leaves no job and no
// blob behind: nothing is stored before the whole form has arrived.
func TestEnrollment_DisconnectMidUploadLeavesNothing(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		env := apitest.New(t, db, apitest.Options{})
		ids := factorIDs(t, env, env.Org)
		tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
		var csv strings.Builder
		csv.WriteString("Primary Email,Email Address\n")
		for i := 0; csv.Len() < 3<<20; i++ {
			fmt.Fprintf(&csv, "user%d@example.com,otp%d@example.com\n", i, i)
		}
		body, ct := form(t, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "big.csv", []byte(csv.String()))
		u, _ := url.Parse(env.URL)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(conn, "POST /api/v1/protection/quick-enrollment/upload-csv HTTP/1.1\r\nHost: %s\r\nAuthorization: Service-oauthtoken %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			u.Host, tok, ct, len(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(body[:len(body)*2/3]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // let the server store part of it
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}

		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			assertNothingStored(t, db)
			if t.Failed() {
				return
			}
		}
		// The database is not left locked: a whole upload goes through.
		uploadCSV(t, env, tok, [][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "Primary Email,Email Address\nu@x.io,a@x.io\n")
	})
}

// With Temporal unreachable an upload is accepted as QUEUED, and the job
// starts by itself (the reconciler) once Temporal is back.
func TestEnrollment_TemporalDownQueuesTheJob(t *testing.T) {
	env := apitest.New(t, dbtest.SQLite(t), apitest.Options{Temporal: true})
	seedUsers(t, env.DB, env.Org, 3)
	ids := factorIDs(t, env, env.Org)
	tok := env.Token(env.Org, "svc.quick_enrollment.CREATE")
	down, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	up := env.Jobs.Client
	env.Jobs.Client = down

	resp := upload(t, env, "/api/v1/protection/quick-enrollment/upload-csv", tok,
		[][2]string{{"factor_configs", ids[enrollment.FactorEmailOTP]}}, "u.csv",
		[]byte("Primary Email,Email Address\nuser1@example.com,a@x.io\nuser2@example.com,b@x.io\nuser3@example.com,c@x.io\n"))
	var acc acceptedBody
	resp.JSON(t, &acc)
	if resp.Status != 202 || acc.Data.Status != "QUEUED" {
		t.Fatalf("%d %s", resp.Status, resp.Body)
	}
	id, _ := models.ParseID("id", acc.Data.ID)
	time.Sleep(300 * time.Millisecond)
	if j, _ := env.Store.Jobs.Get(context.Background(), env.Org.ID, id); j.Status != jobs.JobQueued {
		t.Fatalf("job is %s while Temporal is down", j.Status)
	}

	env.Jobs.Client = up // Temporal is back
	rec := &jobrun.Reconciler{Launcher: &jobrun.Launcher{Client: up, Store: env.Store, Log: slog.New(slog.DiscardHandler), TaskQueue: env.Jobs.TaskQueue},
		Interval: 100 * time.Millisecond}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go rec.Run(ctx)
	if j := env.WaitJob(env.Org, id, time.Minute, finished); j.Status != jobs.JobCompleted || j.SuccessCount != 3 {
		t.Errorf("job ended %s with %d ok", j.Status, j.SuccessCount)
	}
}
