package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"iam/client/agentsim"
)

// agentCommand is `iam agent`: tools that speak the device agents' channel.
func agentCommand(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "agent", Short: "Device agent tools"}
	cmd.AddCommand(agentSimulateCommand(stdout))
	return cmd
}

// agentSimulateCommand is `iam agent simulate`: N simulated device agents
// against a running service.
func agentSimulateCommand(stdout io.Writer) *cobra.Command {
	cfg := agentsim.Config{}
	cmd := &cobra.Command{
		Use:   "simulate --url URL --key KEY --devices N --accounts M --interval D [--rounds R]",
		Short: "Play device agents against a running service",
		Long: "simulate registers N devices with the installation key (GET /api/v1/protection/agents-info " +
			"shows it), each with M local accounts, then has each check in every interval, spread over " +
			"the interval, carrying out and acknowledging the commands it receives, for R rounds or " +
			"until interrupted. It prints the check-ins, commands, errors and latencies.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.BaseURL == "" || cfg.Key == "" {
				return errors.New("--url and --key are required")
			}
			if cfg.Devices < 1 || cfg.Accounts < 0 || cfg.Accounts > 1000 {
				return errors.New("--devices must be at least 1 and --accounts 0 to 1000")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			st, err := agentsim.Run(ctx, cfg)
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			rate := float64(st.CheckIns) / max(st.Elapsed.Seconds(), 1e-9)
			_, err = fmt.Fprintf(stdout, "devices %d registered; check-ins %d (%.1f/s) in %s; commands %d; errors %d; refused %d; p50 %s p99 %s\n",
				st.Registered, st.CheckIns, rate, st.Elapsed.Round(time.Millisecond), st.Commands, st.Errors, st.Refused,
				st.Percentile(50).Round(time.Microsecond), st.Percentile(99).Round(time.Microsecond))
			if err != nil {
				return err
			}
			if st.Errors > 0 {
				return fmt.Errorf("%d check-ins failed", st.Errors)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BaseURL, "url", "", "the service's base address (http://host:port)")
	f.StringVar(&cfg.Key, "key", "", "the DeviceAgent installation key")
	f.IntVar(&cfg.Devices, "devices", 1, "how many devices")
	f.IntVar(&cfg.Accounts, "accounts", 3, "local accounts per device")
	f.DurationVar(&cfg.Interval, "interval", time.Minute, "check-in interval")
	f.IntVar(&cfg.Rounds, "rounds", 0, "check-ins per device; 0 runs until interrupted")
	f.StringVar(&cfg.Prefix, "prefix", "sim", "device name and serial number prefix")
	return cmd
}
