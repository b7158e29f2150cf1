package activities_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"iam/activities"
	"iam/models/dbtest"
	"iam/models/identity"
	"iam/models/jobs"
	"iam/models/sqldb"
	"iam/models/store"
)

// recomputeFixture is an organization of n users (department IT, ids
// ascending) and a dynamic group of its Sales department whose recompute job
// is queued.
type recomputeFixture struct {
	db    *bun.DB
	store *store.Store
	org   *identity.Organization
	users []int64 // ascending
	group *identity.Group
	job   *jobs.Job
}

// recomputeUser is the slice of the users table the fixture fills in bulk.
type recomputeUser struct {
	bun.BaseModel `bun:"table:users"`

	ID         int64     `bun:"id,pk"`
	OrgID      int64     `bun:"org_id"`
	Email      string    `bun:"email"`
	Department string    `bun:"department"`
	CreatedAt  time.Time `bun:"created_at"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

func newRecompute(t *testing.T, db *bun.DB, n int) *recomputeFixture {
	t.Helper()
	ctx := context.Background()
	f := &recomputeFixture{db: db, store: store.NewStore(db)}
	f.org = &identity.Organization{Name: "Recompute", TimeZone: "UTC"}
	if err := f.store.Orgs.Create(ctx, f.org); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for start := 0; start < n; start += 2000 {
		var batch []recomputeUser
		for i := start; i < min(n, start+2000); i++ {
			u := recomputeUser{ID: sqldb.NewID(), OrgID: f.org.ID, Email: fmt.Sprintf("r%06d@example.com", i), Department: "IT", CreatedAt: now, UpdatedAt: now}
			batch = append(batch, u)
			f.users = append(f.users, u.ID)
		}
		if _, err := db.NewInsert().Model(&batch).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.IsSorted(f.users) {
		t.Fatal("user ids are not ascending")
	}
	f.job = &jobs.Job{Kind: "GroupMembershipRecompute", Module: "Identity", ActionName: "Recompute dynamic group members"}
	f.group = &identity.Group{OrgID: f.org.ID, Name: "Sales", IsDynamic: true, MembershipRule: `department eq "Sales"`}
	if err := f.store.Groups.Create(ctx, f.group, nil, f.job); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Jobs.Start(ctx, f.org.ID, f.job.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

// setSales moves users into Sales behind the store's back: no membership is
// re-evaluated, only a recompute batch that covers them makes them members.
func (f *recomputeFixture) setSales(t *testing.T, ids []int64) {
	t.Helper()
	if _, err := f.db.NewUpdate().Table("users").Set("department = 'Sales'").Where("id IN (?)", bun.List(ids)).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f *recomputeFixture) members(t *testing.T) []int64 {
	t.Helper()
	ids, err := f.store.Groups.MemberIDs(context.Background(), f.group.ID, len(f.users)+10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

func (f *recomputeFixture) chunk(batchSize, batches int) activities.RecomputeChunk {
	return activities.RecomputeChunk{
		Job:       jobs.JobRef{JobID: f.job.ID, OrgID: f.org.ID},
		Input:     identity.RecomputeInput{GroupID: f.group.ID, RuleVersion: f.group.RuleVersion},
		BatchSize: batchSize, Batches: batches,
	}
}

func recomputeEnv(f *recomputeFixture) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(&activities.Groups{Store: f.store})
	return env
}

// A retried recompute activity resumes after the last batch its dead attempt
// committed (the heartbeat it left), and runs no earlier batch again: users
// of those batches who changed since are left as those batches wrote them.
func TestRecomputeGroupChunk_RetryResumesAfterLastCommittedBatch(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *bun.DB) {
		f := newRecompute(t, db, 50)
		// The dead attempt committed two batches of 10 (nobody in Sales then)
		// and heartbeated after each; then all 50 users moved to Sales.
		env := recomputeEnv(f)
		env.SetHeartbeatDetails(activities.RecomputeChunkResult{After: f.users[19],
			Progress: activities.Progress{Processed: 20, Success: 20, Total: 50}})
		f.setSales(t, f.users)

		val, err := env.ExecuteActivity("RecomputeGroupChunk", f.chunk(10, 5))
		if err != nil {
			t.Fatal(err)
		}
		var res activities.RecomputeChunkResult
		if err = val.Get(&res); err != nil {
			t.Fatal(err)
		}
		if !res.Done || res.Stopped != "" || res.Progress.Processed != 50 || res.Progress.Total != 50 {
			t.Errorf("retry ended %+v, want done with 50 of 50 users covered", res)
		}
		if got, want := f.members(t), f.users[20:]; !slices.Equal(got, want) {
			t.Errorf("the retry made %d members (first %v), want the 30 users after the last committed batch: it ran committed batches again",
				len(got), got[:min(3, len(got))])
		}
		job, err := f.store.Jobs.Get(context.Background(), f.org.ID, f.job.ID)
		if err != nil || job.Processed != 50 || job.Total != 50 {
			t.Errorf("job after the retry: %+v, %v; want 50 of 50 processed", job, err)
		}
	})
}

// On PostgreSQL a user write made while a recompute activity runs waits for
// at most the batch in flight (each batch is its own transaction holding the
// group's row), never for the activity's other batches. (SQLite has one
// writer at a time and no queue: there a write can wait behind several
// batches, as docs/users-and-groups.md says.)
func TestRecomputeGroupChunk_UserWritesWaitForOneBatchAtMost(t *testing.T) {
	{
		db := dbtest.Postgres(t)
		const users, batchSize, batches = 16000, 400, 40 // long enough that the writes below begin while it runs, even under -race
		f := newRecompute(t, db, users)
		f.setSales(t, f.users)
		env := recomputeEnv(f)
		// Every user is in Sales: each batch committed adds batchSize members.
		committed := func() int64 {
			g, err := f.store.Groups.Get(context.Background(), f.org.ID, f.group.ID)
			if err != nil {
				t.Fatal(err)
			}
			return g.MembersCount / batchSize
		}
		done := make(chan error, 1)
		go func() {
			_, err := env.ExecuteActivity("RecomputeGroupChunk", f.chunk(batchSize, batches))
			done <- err
		}()
		deadline := time.Now().Add(time.Minute)
		for committed() < 2 {
			if time.Now().After(deadline) {
				t.Fatal("no two batches committed within a minute")
			}
			time.Sleep(time.Millisecond)
		}

		// Writes of the organization, each re-evaluating the dynamic group:
		// each may wait for the batch in flight, then goes through.
		for i := range 3 {
			before := committed()
			began := time.Now()
			u := &identity.User{OrgID: f.org.ID, Email: fmt.Sprintf("w%d@example.com", i), Department: "Sales",
				Status: identity.UserActive, Role: identity.RoleUser}
			if err := f.store.Users.Create(context.Background(), u, ""); err != nil {
				t.Fatal(err)
			}
			after := committed()
			t.Logf("user write %d took %v while batches %d to %d of %d committed", i, time.Since(began).Round(time.Microsecond), before, after, batches)
			if after >= batches {
				t.Fatalf("the user write returned after the recompute's last batch: it waited for the whole activity")
			}
			if after-before > 2 {
				t.Errorf("the user write waited while %d batches committed, want at most the one in flight (and the next starting)", after-before)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := committed(); n != batches {
			t.Errorf("%d batches of members after the recompute, want %d", n, batches)
		}
	}
}
