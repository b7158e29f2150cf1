package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHandlers_HandTheRequestContext: no code of the package hands gin's
// *gin.Context where a context.Context is asked for (the store, Temporal,
// context.WithoutCancel ...). gin's context ends with the handler while
// database/sql and the Temporal client may still read a context they were
// given from goroutines of their own; the request's context
// (c.Request.Context()) is the one to pass. The package is type-checked from
// its source against the export data go list gives.
func TestHandlers_HandTheRequestContext(t *testing.T) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	var files []*ast.File
	names, _ := filepath.Glob("*.go")
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(exports[path])
	})
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	if _, err := (&types.Config{Importer: imp}).Check("iam/api", fset, files, info); err != nil {
		t.Fatal(err)
	}
	isGin := func(t types.Type) bool { return t != nil && t.String() == "*github.com/gin-gonic/gin.Context" }
	isCtx := func(t types.Type) bool { return t != nil && t.String() == "context.Context" }
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sig, ok := info.Types[call.Fun].Type.(*types.Signature)
			if !ok {
				return true
			}
			for i, arg := range call.Args {
				var param types.Type
				switch {
				case sig.Variadic() && i >= sig.Params().Len()-1:
					if sl, ok := sig.Params().At(sig.Params().Len() - 1).Type().(*types.Slice); ok {
						param = sl.Elem()
					}
				case i < sig.Params().Len():
					param = sig.Params().At(i).Type()
				}
				if isGin(info.Types[arg].Type) && isCtx(param) {
					t.Errorf("%s: gin's context handed as a context.Context; use c.Request.Context()", fset.Position(arg.Pos()))
				}
			}
			return true
		})
	}
	if len(files) < 10 {
		t.Fatalf("only %d files checked", len(files))
	}
}
