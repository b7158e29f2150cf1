// Command usergen writes the code that follows models.User from its tags
// (package iam/models/usergen says which). go generate runs it:
//
//	usergen -part models -src users.go -out users_gen.go
//	usergen -part api -src ../models/identity/users.go -out users_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"iam/models/usergen"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "usergen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	flags := flag.NewFlagSet("usergen", flag.ContinueOnError)
	part := flags.String("part", "", "the part to write: models or api")
	src := flags.String("src", "", "the Go file that declares User")
	out := flags.String("out", "", "the file to write")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *src == "" || *out == "" {
		return fmt.Errorf("-src and -out are required")
	}
	code, err := usergen.Generate(*part, *src)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, code, 0o644) //nolint:gosec // a generated source file of the repository, readable as its others are
}
