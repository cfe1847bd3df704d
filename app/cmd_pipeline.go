package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/spf13/cobra"
)

func newPipelineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Manage pipelines (apply, show)",
		Args:  noArgs,
	}
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "Create or update a pipeline from a YAML or JSON file",
		Long: `Create or update a pipeline. The file is YAML or JSON; the smallest one is
  {"name":"slow","stages":[{"processor":"noop","config":{"delayMs":5}}]}
Each stage names a processor (` + processorKinds() + `) and its config; a retry
policy per error class and a priority are optional:
  retry:
    transient:   {maxAttempts: 5, delays: [1s, 5s, 30s, 2m]}
    rateLimited: {maxAttempts: 20}
    notFound:    {maxAttempts: 2, delays: [30s]}
A stage may set maxConcurrency (its items in process at once in one worker
process), share (the fraction of its workers) and maxInFlight (its items in
process at once across every worker process), so a slow stage cannot take
every worker; a job's due items of earlier stages are claimed first.
maxRequestsPerJob caps the attempts one job may make (a spending cap for paid
APIs): the job pauses with the reason when it is reached; resume grants as
many again.
Applying bumps the pipeline's version; running workers pick it up within seconds.`,
		Args: exactArgs(1, "one FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			p, err := api.ParsePipeline(raw)
			if err != nil {
				return engine.Errorf(engine.EINVALID, "%s: %s", args[0], engine.ErrorMessage(err))
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if err := p.Validate(env.Registry); err != nil {
					return engine.Errorf(engine.EINVALID, "%s: %s", args[0], engine.ErrorMessage(err))
				}
				stored, err := env.Store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "pipeline %s: version %d (%d stages)\n", stored.Name, stored.Version, len(stored.Stages))
				return nil
			})
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print a pipeline as JSON",
		Args:  exactArgs(1, "one pipeline NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				p, err := env.Store.GetPipeline(ctx, args[0])
				if err != nil {
					return err
				}
				return writeJSON(g.stdout, p)
			})
		},
	}
	cmd.AddCommand(apply, show)
	return cmd
}

func newPipelinesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pipelines",
		Short: "List pipelines",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ps, err := env.Store.ListPipelines(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, map[string]any{"pipelines": ps})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "NAME\tVERSION\tSTAGES\tUPDATED\tDESCRIPTION")
				for _, p := range ps {
					kinds := ""
					for i, s := range p.Stages {
						if i > 0 {
							kinds += " → "
						}
						kinds += s.Processor
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Name, p.Version, kinds, shortTime(p.UpdatedAt), p.Description)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
