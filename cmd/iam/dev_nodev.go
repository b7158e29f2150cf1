//go:build nodev

package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// devCommand of the production binary (-tags nodev), which links no Temporal
// server: it says how to get the one-process shape.
func devCommand(_ []string, _, _ io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Not in this build: run `go run ./cmd/iam dev` (built without -tags nodev)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errDevNotBuilt
		},
	}
}

var errDevNotBuilt = errors.New("this iam binary is the production build (-tags nodev), which leaves out the embedded Temporal server: " +
	"run `go run ./cmd/iam dev`, or build ./cmd/iam without -tags nodev, for the one-process shape")
