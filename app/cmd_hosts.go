package app

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

// hostRateOut is one line of `sluice hosts`.
type hostRateOut struct {
	engine.HostRate
	// RestartRate is the rate the next process starts the host at.
	RestartRate float64 `json:"restartRate"`
	// Stale rates (saved more than 24 h ago) are ignored on start.
	Stale bool `json:"stale"`
}

func newHostsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "List the learned per-host request rates (reset them with 'hosts reset')",
		Long: `List the request rates learned per remote host by the http processor's
pacing, as last saved by a worker process ('sluice worker', 'sluice ingest
--wait', 'sluice --serve' save them every 10 s and when they stop).

A process that starts workers resumes each host at RESTART req/s: the saved
rate, at most 90% of CEILING (the rate at which the host last answered 429),
with the saved concurrency. Rates saved more than 24 h ago are stale and
ignored: such a host starts from slow start (5 req/s) again.`,
		Example: `  sluice hosts
  sluice hosts --json
  sluice hosts reset api.example.com`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				rates, err := env.Store.LoadHostRates(ctx)
				if err != nil {
					return err
				}
				now := time.Now()
				out := make([]hostRateOut, 0, len(rates))
				for _, r := range rates {
					out = append(out, hostRateOut{HostRate: r, RestartRate: round2(r.RestartRate()),
						Stale: now.Sub(r.UpdatedAt) > hostRatesMaxAge})
				}
				if asJSON {
					return writeJSON(g.stdout, out)
				}
				if len(out) == 0 {
					fmt.Fprintln(g.stdout, "no learned host rates")
					return nil
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "HOST\tRATE\tCEILING\tCONCURRENCY\tRESTART\tSAVED")
				for _, o := range out {
					ceiling, saved := "-", shortTime(o.UpdatedAt)
					if o.Ceiling > 0 {
						ceiling = strconv.FormatFloat(o.Ceiling, 'f', 1, 64)
					}
					if o.Stale {
						saved += " (stale: ignored)"
					}
					fmt.Fprintf(tw, "%s\t%.1f\t%s\t%d\t%.1f\t%s\n", o.Host, o.Rate, ceiling, o.Concurrency, o.RestartRate, saved)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newHostsResetCmd(g))
	return cmd
}

func newHostsResetCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reset [HOST...]",
		Short: "Forget the learned rates of some hosts, or of all",
		Long: `Forget the learned rates of the hosts given (as 'sluice hosts' names them,
host:port when the URL has a port), or of every host when none is given: the
next process that starts workers starts those hosts from slow start.

A worker process that is running keeps its rates in memory and saves them
again within 10 s: stop it first, or restart it after the reset.`,
		Example: `  sluice hosts reset api.example.com
  sluice hosts reset`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				n, err := env.Store.DeleteHostRates(ctx, args...)
				if err != nil {
					return err
				}
				if len(args) > 0 && n == 0 {
					return engine.Errorf(engine.ENOTFOUND, "no learned rate for %s (see sluice hosts)", strings.Join(args, ", "))
				}
				fmt.Fprintf(g.stdout, "%d host rate(s) reset\n", n)
				return nil
			})
		},
	}
	cmd.SilenceUsage = true
	return cmd
}
