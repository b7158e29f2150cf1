// Command iam is the identity and access management service: one binary
// with the subcommands dev (everything in one process on embedded
// defaults), serve (the API), worker (the Temporal worker), migrate, and the
// admin commands orgs, clients and token.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	// The IANA time zones a business-hours config names (the TimeZone
	// enum of api/openapi.yaml) whatever the host's zoneinfo holds.
	_ "time/tzdata"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "iam:", err)
		os.Exit(1)
	}
}

// run executes the command line args with the environment environ.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	root := rootCommand(environ, stdout, stderr)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// rootCommand assembles the command tree.
func rootCommand(environ []string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "iam",
		Short:         "Identity and access management service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		devCommand(environ, stdout, stderr),
		serveCommand(environ, stdout, stderr),
		workerCommand(environ, stderr),
		migrateCommand(environ, stdout),
		orgsCommand(environ, stdout, stderr),
		clientsCommand(environ, stdout, stderr),
		tokenCommand(environ, stdout, stderr),
		auditCommand(environ, stdout, stderr),
		agentCommand(stdout),
	)
	return root
}

// configured wraps a command body that needs the configuration: it loads it
// first and refuses to run on an invalid one.
func configured(environ []string, body func(cmd *cobra.Command, cfg Config) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(environ)
		if err != nil {
			return err
		}
		return body(cmd, cfg)
	}
}

// joinClose, deferred, calls close as the function returns and joins its
// error into *err, the function's named result: a failed Close (a store's
// write of pending contact times, its release of the id lease, a Temporal
// server's stop) fails the command instead of being lost.
func joinClose(err *error, close func() error) {
	*err = errors.Join(*err, close())
}
