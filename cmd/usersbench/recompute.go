package main

import (
	"context"
	"fmt"
	"time"

	"iam/models/identity"
	"iam/models/jobs"
	"iam/workflows"
)

// recompute times the recompute of a dynamic group over every seeded user,
// batch by batch as the recompute job's activities run them (without the
// workflow engine in between), then one plain INSERT … SELECT of the same
// membership into an empty static group.
func (b *bench) recompute(ctx context.Context) error {
	rule := `status eq 1 and country ne "US"`
	b.out.Printf("(c) dynamic group recompute over %d users, rule %s\n", b.cfg.users, rule)
	job := &jobs.Job{Kind: workflows.GroupRecomputeWorkflowName, Module: workflows.IdentityModule, ActionName: workflows.GroupRecomputeAction}
	g := &identity.Group{OrgID: b.org.ID, Name: "bench dynamic", IsDynamic: true, MembershipRule: rule}
	if err := b.store.Groups.Create(ctx, g, nil, job); err != nil {
		return err
	}
	t0 := time.Now()
	var after int64
	batches := 0
	for {
		res, err := b.store.Groups.RecomputeBatch(ctx, b.org.ID, g.ID, g.RuleVersion, after, workflows.RecomputeBatchSize)
		if err != nil {
			return err
		}
		batches++
		if res.Stopped != "" {
			return fmt.Errorf("recompute stopped: %s", res.Stopped)
		}
		if res.Done {
			break
		}
		after = res.Next
	}
	batched := time.Since(t0)
	got, err := b.store.Groups.Get(ctx, b.org.ID, g.ID)
	if err != nil {
		return err
	}
	b.out.Printf("    recompute in %d batches of %d users: %s, %d members\n", batches, workflows.RecomputeBatchSize, batched.Round(time.Millisecond), got.MembersCount)

	// Again with every member already there: the cost of a rule change
	// that moves few users.
	g2, err := b.store.Groups.Get(ctx, b.org.ID, g.ID)
	if err != nil {
		return err
	}
	t0 = time.Now()
	after = 0
	for {
		res, batchErr := b.store.Groups.RecomputeBatch(ctx, b.org.ID, g2.ID, g2.RuleVersion, after, workflows.RecomputeBatchSize)
		if batchErr != nil {
			return batchErr
		}
		if res.Done {
			break
		}
		after = res.Next
	}
	b.out.Printf("    recompute again, members already in place: %s\n", time.Since(t0).Round(time.Millisecond))

	static := &identity.Group{OrgID: b.org.ID, Name: "bench plain"}
	if err = b.store.Groups.Create(ctx, static, nil, nil); err != nil {
		return err
	}
	t0 = time.Now()
	_, err = b.db.ExecContext(ctx, `INSERT INTO group_members (group_id, user_id, org_id)
		SELECT ?, id, org_id FROM users WHERE org_id = ? AND ("status" = 1 AND "country" <> 'US')`, static.ID, b.org.ID)
	if err != nil {
		return err
	}
	plain := time.Since(t0)
	got2, err := b.store.Groups.Get(ctx, b.org.ID, static.ID)
	if err != nil {
		return err
	}
	b.out.Printf("    plain INSERT … SELECT, one statement: %s, %d members\n", plain.Round(time.Millisecond), got2.MembersCount)
	b.out.Printf("    batched / plain: %.2f\n", batched.Seconds()/plain.Seconds())
	return nil
}
