// Command contractfuzz is the service's contract fuzzer: it generates
// requests from api/openapi.yaml, sends them to a seeded `iam dev` and
// checks every answer against the document (docs/testing.md, "Contract
// fuzzer").
//
// For each operation it sends, within its share of -duration and at most
// -cases of them, requests valid against the document (positive), requests
// that break one rule of it (negative) and one without credentials. Its
// checks:
//
//   - no answer is a 5xx;
//   - every answer's status, Content-Type and body are ones the document
//     gives the operation (api/openapicheck);
//   - a positive request is not refused as invalid (400 or 422): the
//     document must say every rule the service enforces;
//   - a negative request is not accepted (2xx): the service must enforce
//     every rule the document says;
//   - a request without credentials to a secured operation answers 401.
//
// The expected exceptions, and nothing else: a 429 (rate limits) is never
// a refusal of the request's form, and 422 Idempotency Key Reused (00000115)
// is the answer to a key sent again with another request.
//
// Run from the module's root:
//
//	go run ./cmd/contractfuzz                  # builds iam, starts and seeds iam dev
//	go run ./cmd/contractfuzz -seed 7 -op 'PATCH /api/v1/users/{user_id}' -v
//
// The run is deterministic for a seed: the n-th case of an operation is the
// same request (its ids aside, which the seed's resources give).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"iam/api"
	"iam/api/openapicheck"
	"iam/cmd/internal/iamproc"
)

func main() {
	var o options
	flag.Int64Var(&o.seed, "seed", 1, "random seed: the same seed sends the same requests")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "time for the cases, shared among the operations (seeding apart)")
	flag.IntVar(&o.cases, "cases", 1000, "at most this many cases per operation")
	flag.StringVar(&o.bin, "iam", "", "the iam binary (default build): built from ./cmd/iam when empty")
	flag.StringVar(&o.url, "url", "", "base URL of a running server to fuzz instead of starting iam dev (then -token)")
	flag.StringVar(&o.token, "token", "", "with -url: an access token with every scope (iam token)")
	flag.StringVar(&o.only, "op", "", "only the operations matching this regular expression (\"METHOD /path\")")
	flag.BoolVar(&o.verbose, "v", false, "print every case")
	flag.Parse()
	failures, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contractfuzz:", err)
		os.Exit(2)
	}
	if failures > 0 {
		os.Exit(1)
	}
}

type options struct {
	seed            int64
	duration        time.Duration
	cases           int
	bin, url, token string
	only            string
	verbose         bool
}

func run(o options) (failures int, err error) {
	doc, err := api.LoadOpenAPI()
	if err != nil {
		return 0, err
	}
	checker, err := openapicheck.New(doc)
	if err != nil {
		return 0, err
	}
	var only *regexp.Regexp
	if o.only != "" {
		if only, err = regexp.Compile(o.only); err != nil {
			return 0, fmt.Errorf("-op: %w", err)
		}
	}
	base, token := o.url, o.token
	if base == "" {
		work, merr := os.MkdirTemp("", "contractfuzz-")
		if merr != nil {
			return 0, merr
		}
		defer func() {
			if rerr := os.RemoveAll(work); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}()
		bin := o.bin
		if bin == "" {
			if bin, err = iamproc.Build(work, "iam", ""); err != nil {
				return 0, err
			}
		} else if bin, err = filepath.Abs(bin); err != nil {
			return 0, err
		}
		fmt.Println("starting iam dev ...")
		var stop func()
		if base, token, stop, err = startDev(bin, work); err != nil {
			return 0, err
		}
		defer stop()
	} else if token == "" {
		return 0, fmt.Errorf("-url needs -token")
	}
	began := time.Now()
	s := seed(base, token)
	fmt.Printf("seeded in %s\n", time.Since(began).Round(time.Millisecond))
	for _, w := range s.warnings {
		fmt.Printf("  seed warning: %s\n", w)
	}
	var ops []*operation
	for _, op := range operations(doc) {
		if only == nil || only.MatchString(op.String()) {
			ops = append(ops, op)
		}
	}
	f := &fuzzer{opts: o, base: base, checker: checker, seeded: s, router: mustRouter(doc)}
	return f.fuzz(ops), nil
}
