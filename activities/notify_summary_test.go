package activities_test

import (
	"context"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"iam/activities"
	"iam/models/dbtest"
	"iam/models/notification"
	"iam/notify/smtptest"
)

// The summary of a finished run goes to the template's addresses once: a
// summary step that dies after the server accepted the mail leaves it
// uncertain, and the retried steps send nothing more. Member chunks never
// send a summary, and a summary step never sends to members.
func TestDeliverChunk_SummaryIsSentOnceAfterTheRun(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		f := newRun(t, db, 3, false)
		f.run.Template.Mail.To = []string{"SELF", "ops@example.com"}
		f.run.Template.Mail.Cc = []string{"audit@example.com"}
		if _, err := db.NewUpdate().Model(f.run).Column("template").WherePK().Exec(ctx); err != nil {
			t.Fatal(err)
		}
		srv, mailer := startSMTP(t, smtptest.Options{})
		ns := f.store.Notifications
		ref := activities.RunRef{OrgID: f.org.ID, RunID: f.run.ID}
		live := &activities.Notifications{Store: f.store, Mail: mailer}
		// A summary step while the run runs sends nothing.
		if res, err := activities.DeliverChunk(ctx, live, activities.ChunkInput{Run: ref, From: 1, To: 100, Summary: true}, noProgress); err != nil || res != (activities.ChunkResult{}) {
			t.Fatalf("summary step of a running run: %+v %v", res, err)
		}
		if res, err := activities.DeliverChunk(ctx, live, activities.ChunkInput{Run: ref, From: 1, To: 500}, noProgress); err != nil || res.Sent != 3 {
			t.Fatalf("members: %+v %v", res, err)
		}
		if _, err := ns.FinishRun(ctx, f.run.ID, "gave up"); err != nil {
			t.Fatal(err)
		}
		from, to, err := ns.PrepareSummary(ctx, f.run.ID)
		if err != nil || from != 4 || to != 5 {
			t.Fatalf("summary range [%d, %d) %v", from, to, err)
		}
		// A member chunk whose range reaches the summary leaves it alone.
		if res, err := activities.DeliverChunk(ctx, live, activities.ChunkInput{Run: ref, From: 1, To: 500}, noProgress); err != nil || res != (activities.ChunkResult{}) {
			t.Fatalf("member chunk after the run: %+v %v", res, err)
		}

		dying := &dyingMailer{next: mailer, k: 1, dead: make(chan struct{}), release: make(chan struct{})}
		first := &activities.Notifications{Store: f.store, Mail: dying}
		firstDone := make(chan error, 1)
		summary := activities.ChunkInput{Run: ref, From: from, To: to, Summary: true}
		go func() {
			_, err := activities.DeliverChunk(ctx, first, summary, noProgress)
			firstDone <- err
		}()
		<-dying.dead // the server has the summary; the step never records it
		for range 2 {
			res, err := activities.DeliverChunk(ctx, live, summary, noProgress)
			if err != nil || res.Sent != 0 {
				t.Fatalf("retried summary step: %+v %v", res, err)
			}
		}
		close(dying.release)
		if err := <-firstDone; err != nil { // the zombie's own result is not what the test checks: what it sent is
			t.Logf("the zombie attempt ended: %v", err)
		}

		var summaries int
		for _, m := range srv.Messages() {
			if strings.Contains(string(m.Data), "X-Iam-Summary: 1") {
				summaries++
				if strings.Join(m.To, ",") != "ops@example.com,audit@example.com" {
					t.Errorf("summary sent to %v", m.To)
				}
			}
		}
		got := perRecipient(t, srv) // fails on any address that got two
		if summaries != 1 || srv.Count() != 4 || got["ops@example.com"] != 1 {
			t.Errorf("%d summaries among %d messages (%v); want 1 among 4", summaries, srv.Count(), got)
		}
		ds, _ := ns.Deliveries(ctx, f.run.ID)
		if len(ds) != 4 || ds[3].Kind != notification.DeliverySummary || ds[3].State != notification.DeliveryUncertain {
			t.Errorf("deliveries %+v; want the summary uncertain", ds)
		}
	})
}
