package main

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listedPackage is what the layout rules read of `go list -json`.
type listedPackage struct {
	ImportPath   string
	Name         string
	Module       *struct{ Path string }
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

// lowerLayers lists, for each layer, the layers above it that neither it
// nor its tests may import: a test of a lower layer that imported an upper
// one would drag the upper layer's dependencies (the Temporal server, with
// api/apitest) into its test binary, and hide a cycle.
var lowerLayers = map[string][]string{
	"models":     {"api", "activities", "workflows", "worker", "notify", "cmd"},
	"notify":     {"api", "activities", "workflows", "worker", "cmd"},
	"activities": {"api", "workflows", "worker", "cmd"},
	"workflows":  {"api", "worker", "cmd"},
	"worker":     {"api", "cmd"},
}

// areas are the packages of models/ that own a part of the database, lowest
// first: an area imports models, the helper packages beside it
// (areaHelpers) and only the areas before it here. models/store composes
// them all; models/decide sits above protection, whose policies it applies.
var areas = []string{"sqldb", "audit", "hooks", "jobs", "oauthstore", "identity", "devices", "enrollment", "notification", "protection", "management", "scim", "decide", "store"}

// areaHelpers are the packages of models/ that hold no area: parsers,
// sealing and the lists' conventions. They import no area.
var areaHelpers = []string{"listing", "secret", "criteria", "csvimport", "safezip"}

// areaViolations checks one package of models/ against areas.
func areaViolations(mod string, p listedPackage) []string {
	rel, ok := strings.CutPrefix(p.ImportPath, mod+"/models/")
	if !ok {
		return nil
	}
	rank := slices.Index(areas, rel)
	helper := slices.Contains(areaHelpers, strings.Split(rel, "/")[0])
	if rank < 0 && !helper {
		return nil // test fixtures (dbtest, modeltest) and generators
	}
	var out []string
	for _, i := range p.Imports {
		dep, ok := strings.CutPrefix(i, mod+"/models/")
		if !ok {
			continue
		}
		depRank := slices.Index(areas, dep)
		switch {
		case depRank < 0:
			// a helper package
		case helper:
			out = append(out, p.ImportPath+" (a helper) imports the area "+i)
		case depRank >= rank:
			out = append(out, p.ImportPath+" imports "+i+", an area at or above it")
		}
	}
	return out
}

// layoutViolations checks the import rules of DESIGN.md's layout table
// against the packages of module mod:
//   - models and its packages (but its test helpers, models/dbtest) import
//     neither fosite nor gin, not even through another package;
//   - api and its packages do not import activities (job identity lives in
//     models, workflow inputs in workflows);
//   - api, activities, workflows and worker hold no database handle (they
//     do not import bun);
//   - no package under api/ but the test harness (api/apitest) imports api
//     itself: api/oauth and api/auth sit beside it, not above it;
//   - workflows import only the standard library, the Temporal SDK,
//     activities (signatures) and models and its areas (the types they
//     carry), never the store or the database (no store calls);
//   - an area of models imports only the areas below it (areaViolations);
//   - a lower layer and its tests import no layer above it (lowerLayers);
//   - only packages under cmd/ are programs.
func layoutViolations(mod string, pkgs []listedPackage) []string {
	var out []string
	under := func(path, dir string) bool {
		return path == mod+"/"+dir || strings.HasPrefix(path, mod+"/"+dir+"/")
	}
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != mod {
			continue
		}
		if under(p.ImportPath, "models") && !under(p.ImportPath, "models/dbtest") {
			for _, d := range p.Deps {
				for _, banned := range []string{"github.com/ory/fosite", "github.com/gin-gonic/gin"} {
					if d == banned || strings.HasPrefix(d, banned+"/") {
						out = append(out, p.ImportPath+" imports "+d)
					}
				}
			}
		}
		if under(p.ImportPath, "api") && slices.ContainsFunc(p.Imports, func(i string) bool { return under(i, "activities") }) {
			out = append(out, p.ImportPath+" imports "+mod+"/activities")
		}
		// The Store is the only door to the database: no layer above models
		// holds a database handle (api/apitest, a test harness, may).
		for _, layer := range []string{"api", "activities", "workflows", "worker"} {
			if under(p.ImportPath, layer) && !under(p.ImportPath, "api/apitest") && slices.Contains(p.Imports, "github.com/uptrace/bun") {
				out = append(out, p.ImportPath+" imports github.com/uptrace/bun")
			}
		}
		if under(p.ImportPath, "api") && p.ImportPath != mod+"/api" && !under(p.ImportPath, "api/apitest") &&
			slices.Contains(p.Imports, mod+"/api") {
			out = append(out, p.ImportPath+" imports "+mod+"/api")
		}
		if under(p.ImportPath, "workflows") {
			for _, i := range p.Imports {
				first, _, _ := strings.Cut(i, "/")
				std := !strings.Contains(first, ".") && first != mod
				types := (i == mod+"/models" || strings.HasPrefix(i, mod+"/models/")) &&
					!under(i, "models/store") && !under(i, "models/sqldb")
				if !std && !strings.HasPrefix(i, "go.temporal.io/") && i != mod+"/activities" && !types {
					out = append(out, p.ImportPath+" imports "+i)
				}
			}
		}
		for _, layer := range slices.Sorted(maps.Keys(lowerLayers)) {
			above := lowerLayers[layer]
			if !under(p.ImportPath, layer) || under(p.ImportPath, "models/dbtest") {
				continue
			}
			for _, i := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
				for _, a := range above {
					if under(i, a) {
						out = append(out, p.ImportPath+" (or its tests) imports "+i)
					}
				}
			}
		}
		out = append(out, areaViolations(mod, p)...)
		if p.Name == "main" && !under(p.ImportPath, "cmd") {
			out = append(out, p.ImportPath+" is a main package outside cmd/")
		}
	}
	return out
}

// TestLayout: `go list -deps` shows no import against DESIGN.md's table.
func TestLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Module,Imports,Deps,TestImports,XTestImports", "./...")
	cmd.Dir = root
	stdout, err := cmd.Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("go list: %v\n%s", err, exitErr.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(stdout)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	var seen []string
	for _, p := range pkgs {
		if p.Module != nil && p.Module.Path == "iam" {
			seen = append(seen, p.ImportPath)
		}
	}
	for _, want := range []string{"iam/models", "iam/api", "iam/api/oauth", "iam/cmd/iam"} {
		if !slices.Contains(seen, want) {
			t.Fatalf("go list did not list %s: %v", want, seen)
		}
	}
	for _, v := range layoutViolations("iam", pkgs) {
		t.Error(v)
	}
}

// TestLayoutViolations: each rule catches what it forbids.
func TestLayoutViolations(t *testing.T) {
	mod := &struct{ Path string }{"iam"}
	pkgs := []listedPackage{
		{ImportPath: "iam/models", Name: "models", Module: mod, Deps: []string{"github.com/ory/fosite/handler/oauth2"}},
		{ImportPath: "iam/models/secret", Name: "secret", Module: mod, Deps: []string{"github.com/gin-gonic/gin"}},
		{ImportPath: "iam/models/dbtest", Name: "dbtest", Module: mod, Deps: []string{"github.com/gin-gonic/gin"}},
		{ImportPath: "iam/api/jobrun", Name: "jobrun", Module: mod, Imports: []string{"iam/activities"}},
		{ImportPath: "iam/api", Name: "api", Module: mod, Imports: []string{"iam/workflows"}, Deps: []string{"iam/activities"}},
		{ImportPath: "iam/activities", Name: "activities", Module: mod, Imports: []string{"github.com/uptrace/bun"}},
		{ImportPath: "iam/api/apitest", Name: "apitest", Module: mod, Imports: []string{"github.com/uptrace/bun"}},
		{ImportPath: "iam/api/oauth", Name: "oauth", Module: mod, Imports: []string{"iam/api/auth", "iam/api"}},
		{ImportPath: "iam/workflows", Name: "workflows", Module: mod, Imports: []string{"time", "go.temporal.io/sdk/workflow", "iam/activities", "iam/models", "iam/notify"}},
		{ImportPath: "iam/worker", Name: "worker", Module: mod, XTestImports: []string{"iam/worker", "iam/api/apitest"}},
		{ImportPath: "iam/workflows/x", Name: "x", Module: mod, Imports: []string{"iam/models/jobs", "iam/models/store"}},
		{ImportPath: "iam/models/identity", Name: "identity", Module: mod, Imports: []string{"iam/models", "iam/models/jobs", "iam/models/devices", "iam/models/listing"}},
		{ImportPath: "iam/models/listing", Name: "listing", Module: mod, Imports: []string{"iam/models/jobs"}},
		{ImportPath: "iam/models/store", Name: "store", Module: mod, Imports: []string{"iam/models/management", "iam/models/identity"}},
		{ImportPath: "iam/api/enrollbench", Name: "main", Module: mod},
		{ImportPath: "iam/cmd/usersbench", Name: "main", Module: mod},
		{ImportPath: "github.com/x/y", Name: "main"},
	}
	want := []string{
		"iam/models imports github.com/ory/fosite/handler/oauth2",
		"iam/models/secret imports github.com/gin-gonic/gin",
		"iam/api/jobrun imports iam/activities",
		"iam/activities imports github.com/uptrace/bun",
		"iam/api/oauth imports iam/api",
		"iam/workflows imports iam/notify",
		"iam/worker (or its tests) imports iam/api/apitest",
		"iam/workflows/x imports iam/models/store",
		"iam/models/identity imports iam/models/devices, an area at or above it",
		"iam/models/listing (a helper) imports the area iam/models/jobs",
		"iam/api/enrollbench is a main package outside cmd/",
	}
	if got := layoutViolations("iam", pkgs); !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDialectSQLInOnePlace: store code asks its area's dialect
// (models/<area>/dialect*.go) for what differs between PostgreSQL and
// SQLite; no other file of models branches on the database's name.
func TestDialectSQLInOnePlace(t *testing.T) {
	files, err := filepath.Glob("../../models/*/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("models sources: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		area := filepath.Base(filepath.Dir(f))
		if strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "dialect") || area == "dbtest" || area == "modeltest" {
			continue
		}
		src, err := os.ReadFile(f) //nolint:gosec // a source file of the repository's models
		if err != nil {
			t.Fatal(err)
		}
		for _, branch := range []string{"IsPostgres(", "Name() ==", "Name() !=", "pgdialect.", "sqlitedialect."} {
			// Open (sqldb/db.go) picks bun's dialect for the driver it opens.
			if strings.Contains(string(src), branch) && (area+"/"+name != "sqldb/db.go" || !strings.HasSuffix(branch, "dialect.")) {
				t.Errorf("models/%s/%s branches on the dialect (%s): put the statement in the area's dialect", area, name, branch)
			}
		}
	}
}

// TestModelsTopLevelIsSmall: new code goes into its area's package, not
// models/ itself (domain errors, ids, transient errors, shared checks).
func TestModelsTopLevelIsSmall(t *testing.T) {
	files, err := filepath.Glob("../../models/*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			n++
		}
	}
	if n == 0 || n > 15 {
		t.Errorf("models/ has %d non-test files at its top level; at most 15", n)
	}
}
