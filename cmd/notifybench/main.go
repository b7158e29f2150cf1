// Command bench measures the notification mail path against a plain go-mail
// loop, in one run, on an in-process SMTP server (github.com/emersion/go-smtp
// on 127.0.0.1):
//
//   - plain loop: go-mail renders and builds the messages, then sends them
//     one after the other over one connection, with its defaults;
//   - notify path: notify.SMTPMailer renders each recipient's message from
//     the template and sends it over its connection pool;
//   - delivery path: the notification send step (activities.DeliverChunk)
//     with its delivery ledger and log in a database (a temporary SQLite
//     file, or -db postgres://…): prepare the run, then claim, render, send
//     and record every recipient, chunk after chunk as one worker does.
//
// It runs two shapes of server. The instant one accepts every message at
// once (the figures above). The relay one takes -relay (20 ms) per message,
// as a real relay does, and compares the same number of connections on both
// sides: the plain loop then runs -conns go-mail clients side by side, each
// sending in turn, against the notify and delivery paths with -conns
// connections.
//
// Usage: go run ./cmd/notifybench [-n 10000] [-rounds 3] [-conns 4] [-claim 4] [-relay 20ms] [-relay-n 1000] [-db postgres://…]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	gomail "github.com/wneessen/go-mail"

	"iam/activities"
	"iam/cmd/internal/benchrun"
	"iam/models/identity"
	"iam/models/notification"
	"iam/models/sqldb"
	"iam/models/store"
	"iam/notify"
	"iam/notify/smtptest"
	"iam/workflows"
)

const (
	subject = "Please enrol, %first_name%"
	content = `<p>Hello %display_name%,</p><p>Your organization asks you to enrol an authentication factor ` +
		`before the end of the week. It takes two minutes: open the enrollment page, choose a factor and follow the steps.</p>` +
		`<p>Thank you,<br>The IT team of %org_name%</p>`
	from = "IAM <iam@example.com>"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(stdout io.Writer, args []string) (err error) {
	out := benchrun.NewReport(stdout)
	defer benchrun.Cleanup(&err, out.Err) // a report cut short fails the run
	flags := flag.NewFlagSet("notifybench", flag.ContinueOnError)
	n := flags.Int("n", 10000, "recipients")
	rounds := flags.Int("rounds", 3, "runs of each path; the median is reported")
	conns := flags.Int("conns", 4, "SMTP connections (and messages in flight) of the notify and delivery paths")
	claim := flags.Int("claim", 4, "deliveries a sender claims per ledger write (IAM_NOTIFY_CLAIM_BATCH)")
	dsn := flags.String("db", "", "database of the delivery path: an empty postgres://… database (migrated here), or empty for a temporary SQLite file")
	relay := flags.Duration("relay", 20*time.Millisecond, "time the relay-shaped server takes per message; 0 skips that shape")
	relayN := flags.Int("relay-n", 1000, "recipients of the relay shape")
	if err = flags.Parse(args); err != nil {
		return err
	}

	// The instant server: one connection for the plain loop.
	r, err := measure(*n, *rounds, *conns, *claim, *dsn, 0, 1)
	if err != nil {
		return err
	}
	out.Printf("%d recipients, one message each, to an in-process SMTP server on 127.0.0.1 that accepts at once; median of %d rounds\n", *n, *rounds)
	r.print(out, *conns, *claim)
	if *relay <= 0 {
		return nil
	}
	// The relay: the same connection count on both sides.
	r, err = measure(*relayN, *rounds, *conns, *claim, *dsn, *relay, *conns)
	if err != nil {
		return err
	}
	out.Printf("%d recipients to an in-process SMTP server that takes %v per message (a relay); median of %d rounds\n", *relayN, *relay, *rounds)
	r.print(out, *conns, *claim)
	return nil
}

// result holds the median rates of one shape.
type result struct {
	plainConns            int
	dialect               string
	plain, path, delivery float64
}

func (r result) print(out *benchrun.Report, conns, claim int) {
	out.Printf("  go-mail plain loop (render, build, send in turn; %d connection(s)): %8.0f msg/s\n", r.plainConns, r.plain)
	out.Printf("  notify SMTP path (render, build, pooled send; %d connections):   %8.0f msg/s = %5.1f%% of the plain loop\n", conns, r.path, 100*r.path/r.plain)
	out.Printf("  delivery path (SMTP path + %s delivery ledger and log, claims of %d): %8.0f msg/s = %5.1f%% of the plain loop\n", r.dialect, claim, r.delivery, 100*r.delivery/r.plain)
}

// measure runs the three paths rounds times against a server that takes
// delay per message, the plain loop over plainConns connections.
func measure(n, rounds, conns, claim int, dsn string, delay time.Duration, plainConns int) (_ result, err error) {
	opts := smtptest.Options{Discard: true}
	if delay > 0 {
		opts.OnData = func(smtptest.Message, *smtp.Conn) error {
			time.Sleep(delay)
			return nil
		}
	}
	srv, err := smtptest.Start(opts)
	if err != nil {
		return result{}, err
	}
	defer benchrun.Cleanup(&err, srv.Close)
	people := recipients(n)

	ledger, err := newLedger(n, dsn)
	if err != nil {
		return result{}, fmt.Errorf("delivery path setup: %w", err)
	}
	defer benchrun.Cleanup(&err, ledger.close)
	// Rounds interleave the paths, so that a busy machine slows them alike.
	var plains, paths, deliveries []float64
	for range rounds {
		for _, p := range []struct {
			rates *[]float64
			run   func() error
		}{
			{&plains, func() error { return plainLoop(srv, people, plainConns) }},
			{&paths, func() error { return notifyPath(srv, people, conns) }},
			{&deliveries, func() error { return ledger.deliver(srv, conns, claim) }},
		} {
			start := time.Now()
			if err = p.run(); err != nil {
				return result{}, err
			}
			*p.rates = append(*p.rates, float64(n)/time.Since(start).Seconds())
		}
	}
	return result{plainConns: plainConns, dialect: ledger.dialect, plain: median(plains), path: median(paths), delivery: median(deliveries)}, nil
}

// median returns the middle of rates.
func median(rates []float64) float64 {
	slices.Sort(rates)
	return rates[len(rates)/2]
}

type person struct{ first, display, email string }

func recipients(n int) []person {
	out := make([]person, n)
	for i := range out {
		out[i] = person{first: fmt.Sprintf("User%05d", i), display: fmt.Sprintf("User%05d Example", i), email: fmt.Sprintf("user%05d@example.com", i)}
	}
	return out
}

func values(p person) map[string]string {
	return map[string]string{"first_name": p.first, "display_name": p.display, "org_name": "Acme"}
}

// plainLoop is go-mail as its documentation shows it: the messages built,
// one connection, Send for each; with conns > 1, that loop on conns
// connections side by side, each sending its share in turn.
func plainLoop(srv *smtptest.Server, people []person, conns int) error {
	msgs := make([]*gomail.Msg, len(people))
	for i, p := range people {
		m := gomail.NewMsg()
		if err := m.From(from); err != nil {
			return err
		}
		if err := m.To(p.email); err != nil {
			return err
		}
		html := notify.Render(content, values(p), true)
		m.Subject(notify.Render(subject, values(p), false))
		m.SetBodyString(gomail.TypeTextPlain, notify.HTMLToText(html))
		m.AddAlternativeString(gomail.TypeTextHTML, html)
		msgs[i] = m
	}
	before := srv.Count()
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- sendInTurn(srv, msgs[i*len(msgs)/conns:(i+1)*len(msgs)/conns])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return accepted(srv, before, len(people))
}

// sendInTurn sends msgs one after the other over one go-mail connection.
func sendInTurn(srv *smtptest.Server, msgs []*gomail.Msg) error {
	c, err := gomail.NewClient(srv.Host, gomail.WithPort(srv.Port), gomail.WithTLSPolicy(gomail.NoTLS))
	if err != nil {
		return err
	}
	if err := c.DialWithContext(context.Background()); err != nil {
		return err
	}
	for _, m := range msgs {
		if err := c.Send(m); err != nil {
			return err
		}
	}
	return c.Close()
}

// notifyPath renders and sends every message through notify.SMTPMailer.
func notifyPath(srv *smtptest.Server, people []person, conns int) (err error) {
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: from, MaxConns: conns})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, m.Close)
	subj, html := notify.Compile(subject), notify.Compile(content)
	before := srv.Count()
	work := make(chan person)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				v := values(p)
				sendErr := m.Send(context.Background(), &notify.Message{To: []string{p.email}, Subject: subj.Render(v, false), HTML: html.Render(v, true)})
				if sendErr != nil {
					errs <- sendErr
					return
				}
			}
		}()
	}
	for _, p := range people {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	if err = <-errs; err != nil {
		return err
	}
	return accepted(srv, before, len(people))
}

func accepted(srv *smtptest.Server, before, n int) error {
	if got := srv.Count() - before; got != n {
		return fmt.Errorf("the server accepted %d messages, want %d", got, n)
	}
	return nil
}

// ledger is a SQLite database with an organization of n users in a group,
// a template and a schedule; each round prepares a new run.
type ledger struct {
	dialect string
	dir     string
	store   *store.Store
	org     *identity.Organization
	sc      *notification.NotificationSchedule
	round   int
}

func newLedger(n int, dsn string) (*ledger, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "iam-notify-bench-")
	if err != nil {
		return nil, err
	}
	l := &ledger{dir: dir, dialect: "SQLite"}
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	db, err := sqldb.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if sqldb.IsPostgres(db) {
		l.dialect = "PostgreSQL"
	}
	if _, err := sqldb.MigrateUp(ctx, db); err != nil {
		return nil, err
	}
	l.store = store.NewStore(db)
	l.org = &identity.Organization{Name: "Acme"}
	if err := l.store.Orgs.Create(ctx, l.org); err != nil {
		return nil, err
	}
	var ids []int64
	for i, p := range recipients(n) {
		u := &identity.User{OrgID: l.org.ID, FirstName: p.first, LastName: "Example", DisplayName: p.display, Email: p.email, Status: identity.UserActive}
		if err := l.store.Users.Create(ctx, u, ""); err != nil {
			return nil, fmt.Errorf("user %d: %w", i, err)
		}
		ids = append(ids, u.ID)
	}
	var groups []int64
	for start := 0; start < len(ids); start += identity.MaxMembersPerRequest {
		g := &identity.Group{OrgID: l.org.ID, Name: fmt.Sprintf("Not enrolled %d", start)}
		if err := l.store.Groups.Create(ctx, g, ids[start:min(start+identity.MaxMembersPerRequest, len(ids))], nil); err != nil {
			return nil, err
		}
		groups = append(groups, g.ID)
	}
	tpl := &notification.Template{OrgID: l.org.ID, Name: "Reminder", Module: notification.ModuleReports, Mail: &notification.MailTemplate{Subject: subject, Content: content}}
	if err := l.store.Templates.Create(ctx, tpl, nil); err != nil {
		return nil, err
	}
	l.sc = &notification.NotificationSchedule{OrgID: l.org.ID, Name: "Daily", TemplateID: tpl.ID, GroupIDs: groups, IsEnabled: true,
		Settings: notification.ScheduleSettings{SchedulerInterval: notification.IntervalDaily, Hours: "9", Minutes: "0"}}
	noSync := func(context.Context, *notification.NotificationSchedule, *notification.NotificationSchedule) error {
		return nil
	}
	if err := l.store.Notifications.CreateSchedule(ctx, l.sc, 0, noSync); err != nil {
		return nil, err
	}
	return l, nil
}

// deliver prepares a run and sends it the way one notify worker does: one
// chunk of 500 after the other, conns messages in flight.
func (l *ledger) deliver(srv *smtptest.Server, conns, claim int) (err error) {
	ctx := context.Background()
	l.round++
	run, err := l.store.Notifications.PrepareRun(ctx, notification.PrepareRunInput{OrgID: l.org.ID, ScheduleID: l.sc.ID,
		ScheduledAt: time.Date(2026, 1, 1, 9, l.round, 0, 0, time.UTC)})
	if err != nil {
		return err
	}
	m, err := notify.NewSMTPMailer(notify.SMTPConfig{Host: srv.Host, Port: srv.Port, TLS: notify.TLSNone, From: from, MaxConns: conns})
	if err != nil {
		return err
	}
	defer benchrun.Cleanup(&err, m.Close)
	a := &activities.Notifications{Store: l.store, Mail: m, Concurrency: conns, ClaimBatch: claim}
	before := srv.Count()
	for from := int64(1); from <= run.Total; from += workflows.NotifyChunkSize {
		in := activities.ChunkInput{Run: activities.RunRef{OrgID: l.org.ID, RunID: run.ID}, From: from, To: from + workflows.NotifyChunkSize}
		if _, err = activities.DeliverChunk(ctx, a, in, func(int64) {}); err != nil {
			return err
		}
	}
	return accepted(srv, before, int(run.Total))
}

// close closes the store and removes its folder.
func (l *ledger) close() error {
	return errors.Join(l.store.Close(), os.RemoveAll(l.dir))
}
