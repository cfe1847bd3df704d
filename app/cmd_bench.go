package app

import "github.com/spf13/cobra"

func newBenchCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "bench", Short: "Run the benchmarks", Hidden: true, RunE: func(*cobra.Command, []string) error { return usagef("bench: not built yet") }}
}
