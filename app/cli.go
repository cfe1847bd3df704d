// Package app is the composition root of Sluice: it wires configuration,
// the store, the engine and (later) adapters and transports, and holds the
// CLI commands. It contains no business logic.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// usageError marks a mistake in how the command was called (exit 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// Main runs the CLI with args (without the program name) and returns the
// process exit code. Errors are printed as one line on stderr.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ue *usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "sluice: %s (see 'sluice --help')\n", oneLine(err.Error()))
		return ExitUsage
	}
	msg := err.Error()
	if code := engine.ErrorCode(err); code != engine.EINTERNAL {
		msg = engine.ErrorMessage(err)
	}
	fmt.Fprintf(stderr, "sluice: %s\n", oneLine(msg))
	return ExitFailure
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// globals are the flags every command shares.
type globals struct {
	data      string
	logFormat string
	logLevel  string
	sync      string
	store     string
	profile   string
	// defaultLevel is the log level when none is given: a command that
	// runs for long (worker) sets info, the others stay quiet.
	defaultLevel string
	stdout       io.Writer
	stderr       io.Writer
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "sluice",
		Short: "Persist-first work queue: files in, every row stored, processed, exported",
		Long: `Sluice turns files into jobs. Every row of a CSV file is stored in an embedded
SQLite database before anything else happens; workers then process the rows
through a pipeline (retrying what failed the right way), and the results can be
exported exactly as the grid shows them.

Quick start:
  sluice --serve                                 the server with its UI on http://127.0.0.1:8080
  sluice-desktop                                 the same UI in a desktop window (make desktop), no port opened
  sluice ingest examples/products.csv --wait     store the rows, process them
  sluice jobs                                    list jobs
  sluice items 1 --status ERROR,NOT_FOUND        look at what failed
  sluice export 1 -o out.csv                     the results as CSV (-o out.xlsx: XLSX)

Environment:
  SLUICE_DATA        data directory (same as --data)
  SLUICE_STORE       sqlite (default) or postgres://user@host:5432/db: one queue for many
                     'sluice worker' processes on many machines (same as --store)
  SLUICE_LOG_FORMAT  text or json (same as --log-format)
  SLUICE_LOG_LEVEL   debug, info, warn or error (same as --log-level)
  SLUICE_SQLITE_SYNC FULL (default: no committed work is lost on power loss) or NORMAL (faster)
  Adaptive bounds (see docs/OPERATIONS.md): SLUICE_INGEST_MIN_ROWS, SLUICE_INGEST_MAX_ROWS,
  SLUICE_INGEST_MAX_BATCH_BYTES, SLUICE_DB_P50_MS, SLUICE_DB_P95_MS, SLUICE_WORKER_TARGET_SLICE_MS,
  SLUICE_CLAIM_MIN, SLUICE_CLAIM_MAX, SLUICE_SAFETY_FACTOR, SLUICE_LOCK_FLOOR_MS, SLUICE_LOCK_CAP_MS,
  SLUICE_CONCURRENCY, SLUICE_REAP_INTERVAL_MS, SLUICE_STALE_INGEST_MS.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.data, "data", envOr("SLUICE_DATA", defaultDataDir()), "data directory (env SLUICE_DATA)")
	pf.StringVar(&g.logFormat, "log-format", envOr("SLUICE_LOG_FORMAT", "text"), "log format: text or json (env SLUICE_LOG_FORMAT)")
	pf.StringVar(&g.logLevel, "log-level", envOr("SLUICE_LOG_LEVEL", ""), "log level: debug, info, warn, error (env SLUICE_LOG_LEVEL; default info for worker, warn otherwise)")
	pf.StringVar(&g.store, "store", envOr("SLUICE_STORE", "sqlite"), "where jobs live: sqlite (the data directory's file) or a postgres://user@host:port/db URL shared by many workers (env SLUICE_STORE)")
	pf.StringVar(&g.sync, "sqlite-sync", envOr("SLUICE_SQLITE_SYNC", "FULL"), "SQLite synchronous: FULL or NORMAL (env SLUICE_SQLITE_SYNC)")

	pf.StringVar(&g.profile, "cpuprofile", "", "write a CPU profile of this command to a file")
	_ = pf.MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.profile == "" {
			return nil
		}
		f, err := os.Create(g.profile)
		if err != nil {
			return err
		}
		return pprof.StartCPUProfile(f)
	}
	root.PersistentPostRun = func(*cobra.Command, []string) {
		if g.profile != "" {
			pprof.StopCPUProfile()
		}
	}

	var sf serveFlags
	root.Flags().BoolVar(&sf.serve, "serve", false, "run the server: workers, HTTP API and UI (see 'sluice serve --help')")
	sf.register(root)
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q", args[0])
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if !sf.serve {
			if desktopBuilt {
				return runDesktop(cmd, g, &sf) // sluice-desktop with no command: the window
			}
			return cmd.Help()
		}
		return runServe(cmd, g, &sf)
	}
	root.AddCommand(
		newServeCmd(g), newUserCmd(g), newAuditCmd(g), newKickoffCmd(g), newDeadCmd(g),
		newIngestCmd(g), newWorkerCmd(g), newJobsCmd(g), newJobCmd(g), newItemsCmd(g), newItemCmd(g),
		newExportCmd(g), newReprocessCmd(g), newStateCmd(g, "pause"), newStateCmd(g, "resume"),
		newStateCmd(g, "cancel"), newDeleteCmd(g), newPipelineCmd(g), newPipelinesCmd(g),
		newHostsCmd(g), newStatsCmd(g),
		newSourceCmd(g), newSourcesCmd(g),
		newDefinitionCmd(g), newDefinitionsCmd(g), newTriggerCmd(g), newTriggersCmd(g), newWorkersCmd(g),
		newMigrateStoreCmd(g), newBenchCmd(g), newVersionCmd(g),
	)
	for _, c := range root.Commands() {
		c.SilenceUsage = true
	}
	return root
}

func newLogger(g *globals) (*slog.Logger, error) {
	var level slog.Level
	name := g.logLevel
	if name == "" {
		name = g.defaultLevel
	}
	if name == "" {
		name = "warn"
	}
	if err := level.UnmarshalText([]byte(name)); err != nil {
		return nil, usagef("--log-level: %q is not one of debug, info, warn, error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text", "":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, usagef("--log-format: %q is not text or json", g.logFormat)
}

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(g.stdout, "sluice", Version)
			return nil
		},
	}
}

// Argument validators that report usage errors (exit 2).
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}
