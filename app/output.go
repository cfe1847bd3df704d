package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/engine"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// statusFlag parses a --status value such as "ERROR,NOT_FOUND"; a bad
// name is a usage error.
func statusFlag(v string) ([]engine.ItemStatus, error) {
	sts, err := engine.ParseItemStatuses(v)
	if err != nil {
		return nil, usagef("--status: %s", engine.ErrorMessage(err))
	}
	return sts, nil
}

func parseID(s, what string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("%s: %q is not a valid id (a positive whole number)", what, s)
	}
	return id, nil
}

func shortTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func printJobs(w io.Writer, jobs []*engine.Job) error {
	tw := table(w)
	fmt.Fprintln(tw, "ID\tSTATE\tPIPELINE\tITEMS\tDONE\tERROR\tNOT_FOUND\tSKIPPED\tPENDING\tNAME\tCREATED")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", j.ID, j.State, j.Pipeline, j.Counts.Total(),
			j.Counts.Done, j.Counts.Error, j.Counts.NotFound, j.Counts.Skipped, j.Counts.Pending+j.Counts.Processing,
			j.Name, shortTime(j.CreatedAt))
	}
	return tw.Flush()
}

func writeJSONCompact(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
