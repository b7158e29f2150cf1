package activities_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/uptrace/bun"

	"iam/activities"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/notification"
	"iam/models/store"
	"iam/notify"
	"iam/notify/smtptest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// runFixture is a prepared run to n group members.
type runFixture struct {
	store *store.Store
	org   *identity.Organization
	run   *notification.NotificationRun
	users []*identity.User
}

func newRun(t *testing.T, db *bun.DB, n int, withSMS bool) *runFixture {
	t.Helper()
	ctx := context.Background()
	f := &runFixture{store: store.NewStore(db)}
	f.org = &identity.Organization{Name: "Acme & Co", TimeZone: "Europe/Paris"}
	if err := f.store.Orgs.Create(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		u := &identity.User{OrgID: f.org.ID, FirstName: fmt.Sprintf("U%03d", i), LastName: "<Test>", Email: fmt.Sprintf("u%03d@example.com", i),
			MobileNumber: fmt.Sprintf("+1415555%04d", i), Status: identity.UserActive, Role: identity.RoleUser}
		if err := f.store.Users.Create(ctx, u, ""); err != nil {
			t.Fatal(err)
		}
		f.users = append(f.users, u)
		ids = append(ids, u.ID)
	}
	g := &identity.Group{OrgID: f.org.ID, Name: "Not enrolled"}
	if err := f.store.Groups.Create(ctx, g, ids, nil); err != nil {
		t.Fatal(err)
	}
	tpl := &notification.Template{OrgID: f.org.ID, Name: "Reminder", Module: "Reports",
		Mail: &notification.MailTemplate{Subject: "Enrol now, %first_name%", Content: "<p>Hello %display_name% of %org_name%</p>", Severity: "HIGH"}}
	if withSMS {
		tpl.SMS = &notification.SMSTemplate{Content: "Enrol now, %first_name%"}
	}
	files := []notification.NewTemplateFile{{Name: "guide.pdf", ContentType: "application/pdf", Data: []byte("%PDF guide"), Field: "mail.attachments[0]"}}
	if err := f.store.Templates.Create(ctx, tpl, files); err != nil {
		t.Fatal(err)
	}
	sc := &notification.NotificationSchedule{OrgID: f.org.ID, Name: "Daily", TemplateID: tpl.ID, GroupIDs: []int64{g.ID}, IsEnabled: true,
		Settings: notification.ScheduleSettings{SchedulerInterval: "DAILY", Hours: "9", Minutes: "0"}}
	noSync := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
		return nil
	}
	if err := f.store.Notifications.CreateSchedule(ctx, sc, 0, noSync); err != nil {
		t.Fatal(err)
	}
	run, err := f.store.Notifications.PrepareRun(ctx, notification.PrepareRunInput{OrgID: f.org.ID, ScheduleID: sc.ID, ScheduledAt: time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	f.run = run
	return f
}

func (f *runFixture) chunk() activities.ChunkInput {
	return activities.ChunkInput{Run: activities.RunRef{OrgID: f.org.ID, RunID: f.run.ID}, From: 1, To: f.run.Total + 1}
}

func (f *runFixture) states(t *testing.T) map[string]int {
	t.Helper()
	ds, err := f.store.Notifications.Deliveries(context.Background(), f.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range ds {
		out[d.State]++
	}
	return out
}

func startSMTP(t *testing.T, opts smtptest.Options) (*smtptest.Server, *notify.SMTPMailer) {
	t.Helper()
	srv, err := smtptest.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cerr := srv.Close(); cerr != nil {
			t.Error(cerr)
		}
	})
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: "iam@example.com", Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, m
}

// perRecipient counts the messages the server got for each address, and
// fails on any address that got more than one.
func perRecipient(t *testing.T, srv *smtptest.Server) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, m := range srv.Messages() {
		for _, to := range m.To {
			got[to]++
			if got[to] > 1 {
				t.Errorf("%s received %d messages", to, got[to])
			}
		}
	}
	return got
}

func noProgress(int64) {}

func TestDeliverChunk_SendsEachRecipientOneRenderedMail(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newRun(t, db, 25, true)
		srv, mailer := startSMTP(t, smtptest.Options{})
		var smsBodies sync.Map
		gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			smsBodies.Store(r.Header.Get("Idempotency-Key"), string(b))
			w.WriteHeader(202)
		}))
		defer gw.Close()
		sms, _ := notify.NewWebhookGateway(notify.WebhookConfig{URL: gw.URL})
		a := &activities.Notifications{Store: f.store, Mail: mailer, SMS: sms, Concurrency: 3, ClaimBatch: 2}
		res, err := activities.DeliverChunk(context.Background(), a, f.chunk(), noProgress)
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent != 50 || res.Failed+res.Pending+res.Uncertain != 0 {
			t.Fatalf("result %+v, want 50 sent (25 mails, 25 SMS)", res)
		}
		if got := perRecipient(t, srv); len(got) != 25 {
			t.Errorf("%d addresses got mail, want 25", len(got))
		}
		n := 0
		smsBodies.Range(func(k, v any) bool {
			n++
			if !strings.Contains(v.(string), `"message":"Enrol now, U0`) || !strings.HasPrefix(k.(string), "n") {
				t.Errorf("SMS %v: %v", k, v)
			}
			return true
		})
		if n != 25 {
			t.Errorf("%d SMS, want 25", n)
		}
		// One message, parsed: the macros rendered and escaped, the file attached.
		var first smtptest.Message
		for _, m := range srv.Messages() {
			if m.To[0] == "u000@example.com" {
				first = m
			}
		}
		msg, err := mail.ReadMessage(bytes.NewReader(first.Data))
		if err != nil {
			t.Fatal(err)
		}
		if subj, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject")); subj != "Enrol now, U000" {
			t.Errorf("subject %q", subj)
		}
		body := string(first.Data)
		if !strings.Contains(body, "U000 &lt;Test&gt;") || !strings.Contains(body, "Acme &amp; Co") || !strings.Contains(body, "guide.pdf") {
			t.Errorf("rendered body lacks the escaped macros or the attachment:\n%.3000s", body)
		}
		if msg.Header.Get("X-Priority") != "1 (Highest)" || !strings.HasPrefix(msg.Header.Get("Message-Id"), fmt.Sprintf("<n%d.", f.run.NotificationID)) {
			t.Errorf("headers %v", msg.Header)
		}
		// A second step finds nothing to do.
		again, err := activities.DeliverChunk(context.Background(), a, f.chunk(), noProgress)
		if err != nil || again != (activities.ChunkResult{}) || srv.Count() != 25 {
			t.Errorf("second step %+v, %v; server has %d", again, err, srv.Count())
		}
		sum, err := a.FinishNotificationRun(context.Background(), activities.RunRef{OrgID: f.org.ID, RunID: f.run.ID})
		if err != nil || sum.Sent != 50 || sum.Status != "COMPLETED" {
			t.Errorf("finish %+v, %v", sum, err)
		}
	})
}

// dyingMailer sends through next until the k-th message is accepted; then
// the "process dies": every send in flight or started afterwards returns
// only when released, and nothing started after the death is sent.
type dyingMailer struct {
	next     notify.Mailer
	k        int64
	accepted atomic.Int64
	dead     chan struct{}
	once     sync.Once
	release  chan struct{}
}

func (d *dyingMailer) Send(ctx context.Context, m *notify.Message) error {
	select {
	case <-d.dead:
		<-d.release
		return errors.New("the process was dead")
	default:
	}
	err := d.next.Send(ctx, m)
	if err == nil && d.accepted.Add(1) >= d.k {
		d.once.Do(func() { close(d.dead) })
	}
	select {
	case <-d.dead: // accepted by the server, never recorded
		<-d.release
		return errors.New("the process was dead")
	default:
		return err
	}
}

func TestDeliverChunk_AWorkerDyingMidRunSendsNobodyTwice(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newRun(t, db, 120, false)
		srv, mailer := startSMTP(t, smtptest.Options{})
		dying := &dyingMailer{next: mailer, k: 40, dead: make(chan struct{}), release: make(chan struct{})}
		first := &activities.Notifications{Store: f.store, Mail: dying, Concurrency: 4, ClaimBatch: 3}
		firstDone := make(chan error, 1)
		go func() {
			_, err := activities.DeliverChunk(context.Background(), first, f.chunk(), noProgress)
			firstDone <- err
		}()
		<-dying.dead
		time.Sleep(100 * time.Millisecond) // let the dead attempt's other senders reach the wall
		acceptedBeforeDeath := srv.Count()

		// Another worker takes the chunk over.
		second := &activities.Notifications{Store: f.store, Mail: mailer, Concurrency: 4, ClaimBatch: 3}
		res, err := activities.DeliverChunk(context.Background(), second, f.chunk(), noProgress)
		if err != nil {
			t.Fatal(err)
		}
		close(dying.release)                // the dead attempt wakes up as a zombie and writes late
		if err := <-firstDone; err != nil { // the zombie's own result is not what the test checks: what it sent is
			t.Logf("the zombie attempt ended: %v", err)
		}
		got := perRecipient(t, srv) // fails on any address that got two
		states := f.states(t)
		sent, uncertain := states[notification.DeliverySent], states[notification.DeliveryUncertain]
		if sent+uncertain != 120 || uncertain != int(res.Uncertain) {
			t.Errorf("states %v, second step %+v", states, res)
		}
		// Uncertain are the deliveries the dead attempt held: at most its
		// senders × claim batch. Some of them reached the server before it
		// died; none was sent again.
		if uncertain == 0 || uncertain > 4*3 {
			t.Errorf("%d uncertain deliveries, want 1 to 12", uncertain)
		}
		if extra := srv.Count() - sent; extra < 1 || extra > uncertain || len(got) != srv.Count() {
			t.Errorf("server holds %d messages for %d addresses; %d sent, %d uncertain", srv.Count(), len(got), sent, uncertain)
		}
		ds, _ := f.store.Notifications.Deliveries(context.Background(), f.run.ID)
		for _, d := range ds {
			if d.State == notification.DeliverySent && got[d.Address] != 1 {
				t.Errorf("%s is recorded sent but received %d", d.Address, got[d.Address])
			}
		}
		t.Logf("dead attempt: %d accepted by the server before it died; takeover: %d sent, %d uncertain", acceptedBeforeDeath, res.Sent, uncertain)
		log, _ := f.store.Notifications.DeliveryLog(context.Background(), f.run.ID, 0)
		uncertainLogged := 0
		for _, e := range log {
			if e.Outcome == notification.DeliveryUncertain {
				uncertainLogged++
			}
		}
		if uncertainLogged != int(res.Uncertain) {
			t.Errorf("%d uncertain log entries for %d uncertain deliveries", uncertainLogged, res.Uncertain)
		}
	})
}

func TestDeliverChunk_OutcomesOfTheServer(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newRun(t, db, 6, false)
		var deferred atomic.Bool
		srv, mailer := startSMTP(t, smtptest.Options{OnData: func(m smtptest.Message, c *smtp.Conn) error {
			switch m.To[0] {
			case "u001@example.com":
				return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such mailbox"}
			case "u002@example.com":
				if deferred.CompareAndSwap(false, true) {
					return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "greylisted"}
				}
			case "u003@example.com":
				// The message was complete; the answer never comes.
				if err := c.Close(); err != nil {
					t.Errorf("dropping the connection: %v", err)
				}
				return errors.New("dropped")
			}
			return nil
		}})
		a := &activities.Notifications{Store: f.store, Mail: mailer, Concurrency: 1, ClaimBatch: 2}
		res, err := activities.DeliverChunk(context.Background(), a, f.chunk(), noProgress)
		if err != nil {
			t.Fatal(err)
		}
		if want := (activities.ChunkResult{Sent: 3, Failed: 1, Uncertain: 1, Pending: 1}); res != want {
			t.Errorf("first step %+v, want %+v", res, want)
		}
		res, err = activities.DeliverChunk(context.Background(), a, f.chunk(), noProgress)
		if want := (activities.ChunkResult{Sent: 1}); err != nil || res != want {
			t.Errorf("second step %+v, %v; want only the greylisted one sent", res, err)
		}
		got := perRecipient(t, srv)
		if got["u002@example.com"] != 1 || got["u003@example.com"] != 0 || got["u001@example.com"] != 0 || len(got) != 4 {
			t.Errorf("server got %v", got)
		}
		if s := f.states(t); s[notification.DeliverySent] != 4 || s[notification.DeliveryFailed] != 1 || s[notification.DeliveryUncertain] != 1 {
			t.Errorf("states %v", s)
		}
	})
}
