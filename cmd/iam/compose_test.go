package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// The keys of the test's .env for docker-compose.yml (compose interpolates
// them into the iam services).
const (
	composeTestEncryptionKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	composeTestSecretKey     = "compose-test-secret-key-0123456789abcdef-0123456789"
)

// composeServices are the services that run iam and what each runs.
var composeServices = map[string][]string{"iam-migrate": {"migrate", "up"}, "iam-serve": {"serve"}, "iam-worker": {"worker"}}

// loadCompose loads docker-compose.yml as Docker Compose would, with the
// variables of dotenv as its .env file (none when dotenv is nil). Only the
// test's .env is read, never one lying in the working tree.
func loadCompose(t *testing.T, dotenv map[string]string) (*types.Project, error) {
	t.Helper()
	var lines []string
	for k, v := range dotenv {
		lines = append(lines, k+"="+v)
	}
	envFile := filepath.Join(t.TempDir(), "test.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.yml"},
		cli.WithWorkingDirectory("../.."), cli.WithName("iam"),
		cli.WithEnvFiles(envFile), cli.WithDotEnv)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// composeTestDotenv is the test's .env.
func composeTestDotenv() map[string]string {
	return map[string]string{"IAM_ENCRYPTION_KEY": composeTestEncryptionKey, "IAM_SECRET_KEY": composeTestSecretKey,
		"IAM_AUDIT_SIGNING_KEY": composeTestEncryptionKey}
}

// TestCompose_PassesOnlyVariablesTheBinaryReads loads docker-compose.yml as
// Docker Compose would and checks the services that run iam: each has a
// known subcommand, every IAM_* variable it passes is one the binary reads,
// the keys come from .env (and loading fails without them), the workers
// send mail to the mail catcher, and every image is pinned.
func TestCompose_PassesOnlyVariablesTheBinaryReads(t *testing.T) {
	project, err := loadCompose(t, composeTestDotenv())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	known, err := configVariables()
	if err != nil {
		t.Fatal(err)
	}

	wantServices := []string{"postgres", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "mailcatcher", "iam-migrate", "iam-serve", "iam-worker"}
	for _, name := range wantServices {
		if _, ok := project.Services[name]; !ok {
			t.Errorf("service %s is missing", name)
		}
	}
	for name, wantCmd := range composeServices {
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
	envOf := func(service, key string) string {
		if v := project.Services[service].Environment[key]; v != nil {
			return *v
		}
		return ""
	}
	if got := envOf("iam-serve", "IAM_SECRET_KEY"); got != composeTestSecretKey {
		t.Errorf("iam-serve gets IAM_SECRET_KEY %q, want the one of .env", got)
	}
	for _, name := range []string{"iam-serve", "iam-worker"} {
		if got := envOf(name, "IAM_ENCRYPTION_KEY"); got != composeTestEncryptionKey {
			t.Errorf("%s gets IAM_ENCRYPTION_KEY %q, want the one of .env", name, got)
		}
	}
	// The workers mail the catcher, in the clear inside the compose network.
	for key, want := range map[string]string{"IAM_SMTP_HOST": "mailcatcher", "IAM_SMTP_PORT": "1025", "IAM_SMTP_TLS": "none"} {
		if got := envOf("iam-worker", key); got != want {
			t.Errorf("iam-worker has %s=%q, want %q", key, got, want)
		}
	}
	if envOf("iam-worker", "IAM_SMTP_FROM") == "" {
		t.Error("iam-worker has no IAM_SMTP_FROM")
	}
	if mc := project.Services["mailcatcher"]; !slices.ContainsFunc(mc.Ports, func(p types.ServicePortConfig) bool { return p.Target == 1025 }) {
		t.Error("the mail catcher does not take SMTP on 1025")
	}
	if w := project.Services["iam-worker"]; w.Deploy == nil || w.Deploy.Replicas == nil || *w.Deploy.Replicas < 2 {
		t.Error("iam-worker should run two replicas")
	}
	// Every image is pinned by an explicit version tag; the one compose
	// builds from this repository needs a tag that is not latest.
	built := map[string]bool{}
	for _, svc := range project.Services {
		if svc.Build != nil {
			built[svc.Image] = true
		}
	}
	for name, svc := range project.Services {
		ref := svc.Image
		if i := strings.Index(ref, "@sha256:"); i >= 0 {
			ref = ref[:i]
		}
		slash := strings.LastIndex(ref, "/")
		colon := strings.LastIndex(ref, ":")
		tag := ""
		if colon > slash {
			tag = ref[colon+1:]
		}
		switch {
		case svc.Image == "":
			t.Errorf("%s names no image", name)
		case tag == "" || tag == "latest":
			t.Errorf("%s runs %q: pin an explicit version tag", name, svc.Image)
		case !built[svc.Image] && !strings.ContainsAny(tag, "0123456789"):
			t.Errorf("%s runs %q, whose tag is no version", name, svc.Image)
		}
	}
	// Temporal: the plain server after a schema job, not auto-setup.
	if img := project.Services["temporal"].Image; !strings.HasPrefix(img, "temporalio/server:") {
		t.Errorf("temporal runs %s, want temporalio/server", img)
	}
	for _, job := range []string{"temporal-schema", "temporal-namespace"} {
		if img := project.Services[job].Image; !strings.HasPrefix(img, "temporalio/admin-tools:") {
			t.Errorf("%s runs %s, want temporalio/admin-tools", job, img)
		}
	}
	// Every file compose mounts is in the repository.
	for name, svc := range project.Services {
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s: %v", name, v.Source, err)
			}
		}
	}
	if dep, ok := project.Services["temporal"].DependsOn["temporal-schema"]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
		t.Error("temporal must wait for temporal-schema to complete")
	}
	// Every subcommand compose runs must exist.
	root := rootCommand(nil, io.Discard, io.Discard)
	for name, cmd := range composeServices {
		if found, rest, err := root.Find(cmd); err != nil || len(rest) > 0 || found == root {
			t.Errorf("%s runs %v, which is not a subcommand of iam", name, cmd)
		}
	}
}

// TestCompose_RefusesToLoadWithoutKeys: without a .env that sets the keys,
// docker compose stops and names the variable rather than starting services
// that would refuse to run (or run with a well-known key).
func TestCompose_RefusesToLoadWithoutKeys(t *testing.T) {
	for _, missing := range []string{"IAM_ENCRYPTION_KEY", "IAM_SECRET_KEY", "IAM_AUDIT_SIGNING_KEY"} {
		dotenv := composeTestDotenv()
		delete(dotenv, missing)
		_, err := loadCompose(t, dotenv)
		if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "gen-env.sh") {
			t.Errorf("without %s in .env, loading says %v; want an error naming it and deploy/gen-env.sh", missing, err)
		}
	}
	// .env.example lists exactly those keys, with no value.
	example, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range strings.Split(string(example), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		if v != "" {
			t.Errorf(".env.example sets %s: it must hold no value", k)
		}
		keys = append(keys, k)
	}
	if !slices.Equal(keys, []string{"IAM_ENCRYPTION_KEY", "IAM_SECRET_KEY", "IAM_AUDIT_SIGNING_KEY"}) {
		t.Errorf(".env.example lists %v", keys)
	}
}

// TestCompose_GenEnvWritesUsableKeys runs deploy/gen-env.sh in a copy of the
// repository's layout: it writes .env (mode 600) with keys serve and worker
// accept, different on each run, and refuses to overwrite an existing .env.
func TestCompose_GenEnvWritesUsableKeys(t *testing.T) {
	script, readErr := os.ReadFile("../../deploy/gen-env.sh")
	if readErr != nil {
		t.Fatal(readErr)
	}
	run := func(root string) (map[string]string, error) {
		if err := os.MkdirAll(filepath.Join(root, "deploy"), 0o750); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, "deploy", "gen-env.sh")
		//nolint:gosec // a file in the test's temporary directory, run with sh (no execute bit needed)
		if err := os.WriteFile(path, script, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("sh", path).CombinedOutput(); err != nil { //nolint:gosec // the repository's gen-env.sh, copied into the test's directory
			return nil, fmt.Errorf("%w: %s", err, out)
		}
		fi, statErr := os.Stat(filepath.Join(root, ".env"))
		if statErr != nil {
			t.Fatal(statErr)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf(".env has mode %v, want 600", fi.Mode().Perm())
		}
		data, _ := os.ReadFile(filepath.Join(root, ".env")) //nolint:gosec // the .env gen-env.sh wrote in the test's directory
		vars := map[string]string{}
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
				vars[k] = v
			}
		}
		return vars, nil
	}
	root := t.TempDir()
	first, err := run(root)
	if err != nil {
		t.Fatalf("gen-env.sh: %v", err)
	}
	if len(first) != 3 {
		t.Errorf(".env sets %v, want IAM_ENCRYPTION_KEY, IAM_SECRET_KEY and IAM_AUDIT_SIGNING_KEY", first)
	}
	cfg, err := loadConfig([]string{"IAM_ENCRYPTION_KEY=" + first["IAM_ENCRYPTION_KEY"], "IAM_SECRET_KEY=" + first["IAM_SECRET_KEY"],
		"IAM_AUDIT_SIGNING_KEY=" + first["IAM_AUDIT_SIGNING_KEY"]})
	if err != nil {
		t.Fatalf("the keys gen-env.sh wrote do not load: %v", err)
	}
	if signer, signerErr := auditSigner(cfg, ""); signerErr != nil || signer == nil {
		t.Errorf("the worker would refuse IAM_AUDIT_SIGNING_KEY: %v", signerErr)
	}
	if _, err = oauthSecret(cfg.OAuth, "", false); err != nil {
		t.Errorf("serve would refuse IAM_SECRET_KEY: %v", err)
	}
	if _, err = loadCompose(t, first); err != nil {
		t.Errorf("docker-compose.yml does not load with them: %v", err)
	}
	if _, err = run(root); err == nil || !strings.Contains(err.Error(), ".env exists") {
		t.Errorf("a second run over an existing .env: %v, want a refusal", err)
	}
	second, err := run(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if second["IAM_ENCRYPTION_KEY"] == first["IAM_ENCRYPTION_KEY"] || second["IAM_SECRET_KEY"] == first["IAM_SECRET_KEY"] ||
		second["IAM_AUDIT_SIGNING_KEY"] == first["IAM_AUDIT_SIGNING_KEY"] {
		t.Error("two runs wrote the same keys")
	}
}
