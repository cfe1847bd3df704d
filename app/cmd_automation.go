package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/spf13/cobra"
)

func newDefinitionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "definition",
		Short: "Manage allowlisted commands (apply, run)",
		Args:  noArgs,
	}
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "Create or update a command definition from a YAML or JSON file",
		Long: `Create or update an allowlisted command: the only programs Sluice runs. The
smallest file is
  {"key":"hello","executable":"/bin/echo","args":["hello","{{.name}}"],
   "argSchema":{"type":"object","required":["name"]},"timeoutSeconds":10}
Fields: key, description, executable (an absolute path: no shell, no PATH
lookup), args (one text/template per argument, rendered with the payload),
argSchema (the JSON Schema every payload must pass), env (names of variables
passed on besides PATH, HOME, LANG, LC_ALL, TZ, TMPDIR), timeoutSeconds
(default 3600: the whole process group is killed), maxAttempts (default 3),
permanentExitCodes (exit codes not worth a retry), active (default true).

The program runs in DATA/commands/KEY with the payload on stdin and
SLUICE_JOB_ID, SLUICE_ITEM_ID, SLUICE_ATTEMPT set. Stdout that is a JSON object
becomes the item's result; other stdout becomes {"stdout": "..."} (its last
4 KiB). The last 4 KiB of stdout and stderr, the exit code and the pid are kept
with each attempt (sluice item ID).

Each definition gets a pipeline named command.KEY: 'sluice ingest FILE
--pipeline command.KEY' runs the command once per row; 'sluice definition run'
and triggers run it once with one payload.`,
		Args: exactArgs(1, "one FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			d, err := api.ParseDefinition(raw)
			if err != nil {
				return engine.Errorf(engine.EINVALID, "%s: %s", args[0], engine.ErrorMessage(err))
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				stored, err := engine.ApplyDefinition(ctx, env.Store, d, time.Now())
				if err != nil {
					return engine.Errorf(engine.ErrorCode(err), "%s: %s", args[0], engine.ErrorMessage(err))
				}
				fmt.Fprintf(g.stdout, "definition %s: version %d (pipeline %s)\n", stored.Key, stored.Version, stored.PipelineName())
				return nil
			})
		},
	}
	var payload string
	var asJSON bool
	run := &cobra.Command{
		Use:   "run KEY",
		Short: "Start a job that runs a command once with a payload",
		Long: `Start a one-item job of an allowlisted command. The payload (a JSON object)
must pass the definition's argSchema; a failing field is named. A worker
(sluice worker, or --serve) runs it.
  sluice definition run hello --payload '{"name":"Ada"}'`,
		Args: exactArgs(1, "one definition KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				j, err := engine.StartJob(ctx, env.Store, env.Notifier, engine.JobRequest{Definition: args[0],
					Payload: json.RawMessage(payload), Source: engine.SourceManual, SourceRef: "cli", Now: time.Now()})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, engine.ViewJob(j, time.Now()))
				}
				fmt.Fprintf(g.stdout, "job %d: command %s queued\n", j.ID, args[0])
				return nil
			})
		},
	}
	run.Flags().StringVar(&payload, "payload", "{}", "the payload, a JSON object")
	run.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	cmd.AddCommand(apply, run)
	return cmd
}

func newDefinitionsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "definitions",
		Short: "List allowlisted commands",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ds, err := env.Store.ListDefinitions(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, map[string]any{"definitions": nonNilSlice(ds)})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "KEY\tVERSION\tACTIVE\tTIMEOUT\tATTEMPTS\tCOMMAND\tDESCRIPTION")
				for _, d := range ds {
					fmt.Fprintf(tw, "%s\t%d\t%t\t%s\t%d\t%s\t%s\n", d.Key, d.Version, d.IsActive(), d.Timeout(),
						d.WithDefaults().MaxAttempts, strings.Join(append([]string{d.Executable}, d.Args...), " "), d.Description)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func newTriggerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Manage event and schedule triggers (add, set, enable, disable, rm)",
		Args:  noArgs,
	}
	var t engine.Trigger
	var payload string
	var window time.Duration
	add := &cobra.Command{
		Use:   "add NAME (--cron EXPR --tz ZONE | --event NAME) (--definition KEY | --pipeline NAME)",
		Short: "Start jobs on a schedule or on one of Sluice's events",
		Long: `Add a trigger. A schedule trigger fires at the times of a cron expression
(5 fields, or @hourly, @daily, @every 90s) read in an IANA zone:
  sluice trigger add nightly --cron "30 2 * * *" --tz America/New_York --definition hello --payload '{"name":"night"}'
An event trigger fires on one of Sluice's events: ` + strings.Join(engine.EventNames, ", ") + `:
  sluice trigger add on-file --event source.file.ingested --definition hello --payload '{"name":"{{.event.key}}"}'

Jobs started by an event trigger fire no job.* triggers themselves (no loops).
The payload is a JSON object whose string values are templates: .trigger,
.fire.time/.fire.date/.fire.unix (schedules, in the zone) and .event.name,
.event.subject and the event's data (jobId, key, source, ...) for events.

Dedupe: a trigger's job has the key trigger:NAME (schedules) or
trigger:NAME:SUBJECT (events); no second job with that key starts while one
is queued or running, nor within --dedupe-window of the last one.
Schedules fire once per tick across all processes (one holds the scheduler
lease) and across restarts; ticks missed while nothing ran are skipped, or run
once with --missed once. DST: a time that does not exist on the
spring-forward day does not fire that day; a named hour that occurs twice on
the fall-back day fires once (the first); "every hour" expressions fire every
real hour.`,
		Args: exactArgs(1, "one trigger NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t.Name, t.Payload, t.DedupeWindow = args[0], json.RawMessage(payload), engine.Duration(window)
			switch {
			case t.Cron != "" && t.Event != "":
				return usagef("give --cron or --event, not both")
			case t.Cron != "":
				t.Kind = engine.TriggerSchedule
			case t.Event != "":
				t.Kind = engine.TriggerEvent
			default:
				return usagef("give --cron EXPR --tz ZONE or --event NAME")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				stored, err := engine.AddTrigger(ctx, env.Store, &t, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "trigger %s added", stored.Name)
				if stored.NextFireAt != nil {
					fmt.Fprintf(g.stdout, "; next fire %s", api.LocalTime(*stored.NextFireAt, stored.TZ))
				}
				fmt.Fprintln(g.stdout)
				return nil
			})
		},
	}
	f := add.Flags()
	f.StringVar(&t.Cron, "cron", "", "cron expression (5 fields or @every 1m, @daily, ...)")
	f.StringVar(&t.TZ, "tz", "", "IANA time zone of the cron expression (e.g. America/New_York, UTC)")
	f.StringVar(&t.Event, "event", "", "event name: "+strings.Join(engine.EventNames, ", "))
	f.StringVar(&t.Definition, "definition", "", "command definition key to run")
	f.StringVar(&t.Pipeline, "pipeline", "", "pipeline to run the payload through (one item)")
	f.StringVar(&payload, "payload", "{}", "payload template (JSON object; string values are templates)")
	f.DurationVar(&window, "dedupe-window", 0, "no second job of this trigger within this long (e.g. 5m)")
	f.StringVar(&t.Missed, "missed", engine.MissedSkip, "missed schedule ticks: skip or once")
	f.IntVar(&t.Priority, "priority", 0, "job priority (higher runs first)")
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a trigger",
		Args:  exactArgs(1, "one trigger NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if err := env.Store.DeleteTrigger(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "trigger %s removed\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(add, rm, newTriggerSetCmd(g), newTriggerToggleCmd(g, "enable", true), newTriggerToggleCmd(g, "disable", false))
	return cmd
}

// newTriggerToggleCmd is `trigger enable NAME` or `trigger disable NAME`.
func newTriggerToggleCmd(g *globals, verb string, on bool) *cobra.Command {
	long := "Stop a trigger without removing it: a disabled schedule fires no tick and a\ndisabled event trigger ignores its events until it is enabled again."
	if on {
		long = "Enable a disabled trigger. A schedule starts again from its next tick after\nnow: the ticks it missed while disabled are not run."
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a trigger",
		Long:  long,
		Args:  exactArgs(1, "one trigger NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				t, err := engine.EditTrigger(ctx, env.Store, args[0], &engine.TriggerPatch{Enabled: &on}, time.Now())
				if err != nil {
					return err
				}
				printTriggerChange(g, t, verb+"d")
				return nil
			})
		},
	}
}

// newTriggerSetCmd is `trigger set NAME [--cron ...]`: the flags given
// change, the others stay.
func newTriggerSetCmd(g *globals) *cobra.Command {
	var p engine.TriggerPatch
	var cron, tz, def, pipe, payload, missed string
	var window time.Duration
	var priority int
	cmd := &cobra.Command{
		Use:   "set NAME [--cron EXPR] [--tz ZONE] [--payload JSON] [--dedupe-window D] [--priority N] [--missed skip|once]",
		Short: "Change a trigger's settings (only the flags given)",
		Long: `Change a trigger in place; the flags given change, the others stay:
  sluice trigger set nightly --cron "0 3 * * *" --tz Europe/Paris
  sluice trigger set on-file --payload '{"name":"{{.event.key}}"}' --dedupe-window 10m
A changed schedule fires next at its first tick after now. The running
scheduler sees the change within its reload interval (2 s). An event
trigger's event and a trigger's name and kind cannot change: remove it and
add it again.`,
		Args: exactArgs(1, "one trigger NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			setIf := func(name string, dst **string, v *string) {
				if fl.Changed(name) {
					*dst = v
				}
			}
			setIf("cron", &p.Cron, &cron)
			setIf("tz", &p.TZ, &tz)
			setIf("definition", &p.Definition, &def)
			setIf("pipeline", &p.Pipeline, &pipe)
			setIf("missed", &p.Missed, &missed)
			if fl.Changed("payload") {
				raw := json.RawMessage(payload)
				p.Payload = &raw
			}
			if fl.Changed("dedupe-window") {
				d := engine.Duration(window)
				p.DedupeWindow = &d
			}
			if fl.Changed("priority") {
				p.Priority = &priority
			}
			if p == (engine.TriggerPatch{}) {
				return usagef("give at least one setting to change (see --help)")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				t, err := engine.EditTrigger(ctx, env.Store, args[0], &p, time.Now())
				if err != nil {
					return err
				}
				printTriggerChange(g, t, "changed")
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cron, "cron", "", "cron expression (5 fields or @every 1m, @daily, ...)")
	f.StringVar(&tz, "tz", "", "IANA time zone of the cron expression")
	f.StringVar(&def, "definition", "", "command definition key to run instead")
	f.StringVar(&pipe, "pipeline", "", "pipeline to run instead")
	f.StringVar(&payload, "payload", "", "payload template (JSON object; string values are templates)")
	f.DurationVar(&window, "dedupe-window", 0, "no second job of this trigger within this long (0: none)")
	f.IntVar(&priority, "priority", 0, "job priority (higher runs first)")
	f.StringVar(&missed, "missed", "", "missed schedule ticks: skip or once")
	return cmd
}

func printTriggerChange(g *globals, t *engine.Trigger, what string) {
	fmt.Fprintf(g.stdout, "trigger %s %s", t.Name, what)
	if !t.Enabled {
		fmt.Fprint(g.stdout, "; disabled")
	} else if t.NextFireAt != nil {
		fmt.Fprintf(g.stdout, "; next fire %s", api.LocalTime(*t.NextFireAt, t.TZ))
	}
	fmt.Fprintln(g.stdout)
}

func newTriggersCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "triggers",
		Short: "List triggers with their next fire time (in each trigger's zone)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ts, err := env.Store.ListTriggers(ctx, &engine.ListTriggersParams{})
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]any, 0, len(ts))
					for _, t := range ts {
						out = append(out, api.ViewTrigger(t))
					}
					return writeJSON(g.stdout, map[string]any{"triggers": out})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "NAME\tON\tRUNS\tNEXT FIRE\tLAST\tDEDUPE\tENABLED")
				for _, t := range ts {
					on, runs, next := t.Event, t.PipelineName(), "-"
					if t.Kind == engine.TriggerSchedule {
						on = t.Cron + " " + t.TZ
					}
					if t.NextFireAt != nil {
						next = api.LocalTime(*t.NextFireAt, t.TZ)
					}
					last := t.LastResult
					if t.LastJobID != 0 {
						last += fmt.Sprintf(" (job %d)", t.LastJobID)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, on, runs, next, cmpOr(last, "-"), t.DedupeWindow.D(),
						map[bool]string{true: "yes", false: "no"}[t.Enabled])
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func newWorkersCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List worker processes by heartbeat (stale ones are flagged)",
		Long: `List the processes that run workers (sluice worker, sluice --serve) by their
heartbeat: id (host:pid:boot), version, last seen, items in process, and
whether it runs the scheduler. A worker silent for more than 15 s is STALE:
its leases are reclaimed by the other workers at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ws, err := env.Store.ListWorkers(ctx)
				if err != nil {
					return err
				}
				views := api.ViewWorkers(ws, time.Now())
				if asJSON {
					return writeJSON(g.stdout, map[string]any{"workers": views})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "ID\tVERSION\tLAST SEEN\tRUNNING\tSCHEDULER\tSTATE")
				for _, w := range views {
					state := "ok"
					if w.Stale {
						state = "STALE"
					}
					fmt.Fprintf(tw, "%s\t%s\t%.0fs ago\t%d\t%t\t%s\n", w.ID, w.Version, w.SecondsSinceSeen, w.Running, w.Scheduler, state)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
