package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
)

// TestCompose_PassesOnlyVariablesTheBinaryReads loads docker-compose.yml as
// Docker Compose would and checks the services that run iam: each has a
// known subcommand, and every IAM_* variable it passes is one the binary
// reads.
func TestCompose_PassesOnlyVariablesTheBinaryReads(t *testing.T) {
	ctx := context.Background()
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.yml"},
		cli.WithWorkingDirectory("../.."), cli.WithName("iam"))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	known, err := configVariables()
	if err != nil {
		t.Fatal(err)
	}

	wantServices := []string{"postgres", "temporal", "temporal-ui", "mailcatcher", "iam-migrate", "iam-serve", "iam-worker"}
	for _, name := range wantServices {
		if _, ok := project.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	subcommands := map[string][]string{"iam-migrate": {"migrate", "up"}, "iam-serve": {"serve"}, "iam-worker": {"worker"}}
	for name, wantCmd := range subcommands {
		svc := project.Services[name]
		if !slices.Equal([]string(svc.Command), wantCmd) {
			t.Errorf("%s runs %v, want %v", name, svc.Command, wantCmd)
		}
		if len(svc.Environment) == 0 {
			t.Errorf("%s passes no configuration", name)
		}
		for key := range svc.Environment {
			if !strings.HasPrefix(key, "IAM_") || !slices.Contains(known, key) {
				t.Errorf("%s passes %s, which the binary does not read", name, key)
			}
		}
		if _, ok := svc.Environment["IAM_DATABASE_URL"]; !ok {
			t.Errorf("%s needs IAM_DATABASE_URL", name)
		}
	}
	if _, ok := project.Services["iam-serve"].Environment["IAM_SECRET_KEY"]; !ok {
		t.Error("iam-serve needs IAM_SECRET_KEY: serve refuses to start without it")
	}
	for _, name := range []string{"iam-serve", "iam-worker"} {
		if _, ok := project.Services[name].Environment["IAM_ENCRYPTION_KEY"]; !ok {
			t.Errorf("%s needs IAM_ENCRYPTION_KEY: serve and worker refuse to start without it", name)
		}
	}
	if w := project.Services["iam-worker"]; w.Deploy == nil || w.Deploy.Replicas == nil || *w.Deploy.Replicas < 2 {
		t.Error("iam-worker should run two replicas")
	}
	// Every subcommand compose runs must exist.
	root := rootCommand(nil, io.Discard, io.Discard)
	for name, cmd := range subcommands {
		if found, rest, err := root.Find(cmd); err != nil || len(rest) > 0 || found == root {
			t.Errorf("%s runs %v, which is not a subcommand of iam", name, cmd)
		}
	}
}
