package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

// statsLocalOut is `sluice stats` without --url: what the store knows.
type statsLocalOut struct {
	At        time.Time            `json:"at"`
	Queue     *engine.QueueSummary `json:"queue"`
	HostRates []engine.HostRate    `json:"hostRates"`
}

// remoteStats is the part of GET /api/stats the table shows.
type remoteStats struct {
	At     time.Time             `json:"at"`
	Queue  *engine.QueueSummary  `json:"queue"`
	Runner *engine.RunSummary    `json:"runner"`
	Claim  *adapt.ClaimSnapshot  `json:"claim"`
	Hosts  []hostlimit.HostState `json:"hosts"`
	// LastIngest and Series are kept as the server sent them.
	LastIngest *struct {
		JobID      int64   `json:"jobId"`
		Rows       int64   `json:"rows"`
		Batches    int     `json:"batches"`
		FinalBatch int     `json:"finalBatch"`
		Ms         float64 `json:"ms"`
	} `json:"lastIngest"`
	Series map[string]json.RawMessage `json:"series"`
}

// statsTimeout bounds the request to a server.
const statsTimeout = 30 * time.Second

func newStatsCmd(g *globals) *cobra.Command {
	var asJSON, series bool
	var baseURL, token string
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show the adaptive controllers' state: of the store, or of a running server (--url)",
		Long: `Without --url, open the data directory and print what the store knows: the
queue (items due, later, processing; jobs ingesting) and the learned per-host
rates (as 'sluice hosts' lists them).

With --url, ask a running 'sluice --serve' for its GET /api/stats: the queue,
its runner's counters, the claim controller (claim size, avgItemMs), each
host's rate and concurrency, and the last upload's ingest batches. --series
adds the last 10 minutes the server sampled once a second (claim size,
avgItemMs, lease, items/s, queue depth, per-host rate and concurrency,
ingest batch rows), summarized per line; --json prints the answer as is.`,
		Example: `  sluice stats
  sluice stats --json
  sluice stats --url http://127.0.0.1:8080 --token "$SLUICE_TOKEN" --series`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if baseURL != "" {
				return remoteStatsCmd(cmd.Context(), g, baseURL, token, series, asJSON)
			}
			if series {
				return usagef("--series needs --url (the series live in the server's memory)")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				now := time.Now()
				q, err := env.Store.QueueSummary(ctx, now)
				if err != nil {
					return err
				}
				rates, err := env.Store.LoadHostRates(ctx)
				if err != nil {
					return err
				}
				out := statsLocalOut{At: now, Queue: q, HostRates: append([]engine.HostRate{}, rates...)}
				if asJSON {
					return writeJSON(g.stdout, out)
				}
				printQueue(g.stdout, q)
				fmt.Fprintln(g.stdout)
				if len(rates) == 0 {
					fmt.Fprintln(g.stdout, "no learned host rates")
					return nil
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "HOST\tRATE\tCEILING\tCONCURRENCY\tSAVED")
				for _, r := range rates {
					fmt.Fprintf(tw, "%s\t%.1f\t%s\t%d\t%s\n", r.Host, r.Rate, ceilingText(r.Ceiling), r.Concurrency, shortTime(r.UpdatedAt))
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.BoolVar(&series, "series", false, "with --url: add the server's time series")
	f.StringVar(&baseURL, "url", envOr("SLUICE_URL", ""), "a running server's address, e.g. http://127.0.0.1:8080 (env SLUICE_URL)")
	f.StringVar(&token, "token", envOr("SLUICE_TOKEN", ""), "API token for --url (env SLUICE_TOKEN)")
	return cmd
}

func ceilingText(c float64) string {
	if c <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", c)
}

func printQueue(w io.Writer, q *engine.QueueSummary) {
	next := "-"
	if q.NextRunAt != nil {
		next = shortTime(*q.NextRunAt)
	}
	tw := table(w)
	fmt.Fprintln(tw, "DUE\tLATER\tPROCESSING\tINGESTING\tNEXT RUN")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\n", q.Due, q.Later, q.Processing, q.Ingesting, next)
	tw.Flush()
}

// remoteStatsCmd fetches GET /api/stats from a server and prints it.
func remoteStatsCmd(ctx context.Context, g *globals, baseURL, token string, series, asJSON bool) error {
	u, err := url.Parse(strings.TrimRight(baseURL, "/") + "/api/stats")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url: %q is not an http(s) address", baseURL)
	}
	if series {
		u.RawQuery = "series=1"
	}
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, msg)
	}
	if asJSON {
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return fmt.Errorf("GET %s: the answer is not JSON: %w", u.Redacted(), err)
		}
		buf.WriteByte('\n')
		_, err := g.stdout.Write(buf.Bytes())
		return err
	}
	var st remoteStats
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("GET %s: the answer is not stats: %w", u.Redacted(), err)
	}
	return printRemoteStats(g.stdout, &st)
}

func printRemoteStats(w io.Writer, st *remoteStats) error {
	fmt.Fprintf(w, "server stats at %s\n\n", shortTime(st.At))
	if st.Queue != nil {
		printQueue(w, st.Queue)
	}
	tw := table(w)
	if st.Runner == nil {
		fmt.Fprintln(w, "\nno runner in the server process (workers run elsewhere)")
	} else {
		r := st.Runner
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "WORKER\tCLAIMED\tCOMPLETED\tRETRIED\tREAPED\tITEMS/S")
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\n", r.WorkerID, r.Claimed, r.Completed, r.Retried, r.Reaped, r.ItemsPerSec)
		tw.Flush()
	}
	if c := st.Claim; c != nil {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "CLAIM SIZE\tMIN\tMAX\tAVG ITEM MS\tPRESSURE\tCONCURRENCY")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.2f\t%d\n", c.Size, c.Min, c.Max, c.AvgItemMs, c.Pressure, c.Concurrency)
		tw.Flush()
	}
	if len(st.Hosts) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "HOST\tRATE\tCEILING\tCONCURRENCY\tIN FLIGHT\tOK\t429\tERRORS")
		for _, h := range st.Hosts {
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%d\t%d\t%d\t%d\t%d\n", h.Host, h.Rate, ceilingText(h.Ceiling), h.Concurrency, h.InFlight, h.OK, h.RateLimited, h.Errors)
		}
		tw.Flush()
	}
	if in := st.LastIngest; in != nil {
		fmt.Fprintf(w, "\nlast upload: job %d, %d rows in %d batches (final batch %d rows), %.0f ms\n", in.JobID, in.Rows, in.Batches, in.FinalBatch, in.Ms)
	}
	if st.Series != nil {
		return printSeries(w, st.Series)
	}
	return nil
}

// printSeries summarizes each line of the series: its samples, last,
// minimum, maximum and mean.
func printSeries(w io.Writer, raw map[string]json.RawMessage) error {
	type line struct {
		name   string
		points []adapt.Point
	}
	var lines []line
	for name, msg := range raw {
		switch name {
		case "everyMs", "capacity":
			continue
		case "hosts":
			var hosts map[string]map[string][]adapt.Point
			if err := json.Unmarshal(msg, &hosts); err != nil {
				return fmt.Errorf("series.hosts: %w", err)
			}
			for host, m := range hosts {
				for k, ps := range m {
					lines = append(lines, line{"host " + host + " " + k, ps})
				}
			}
		default:
			var ps []adapt.Point
			if err := json.Unmarshal(msg, &ps); err != nil {
				continue // a line this client does not know
			}
			lines = append(lines, line{name, ps})
		}
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.name, b.name) })
	fmt.Fprintln(w)
	if len(lines) == 0 {
		fmt.Fprintln(w, "no samples yet")
		return nil
	}
	tw := table(w)
	fmt.Fprintln(tw, "SERIES\tSAMPLES\tLAST\tMIN\tMAX\tMEAN")
	for _, l := range lines {
		if len(l.points) == 0 {
			fmt.Fprintf(tw, "%s\t0\t-\t-\t-\t-\n", l.name)
			continue
		}
		lo, hi, sum := l.points[0].V, l.points[0].V, 0.0
		for _, p := range l.points {
			lo, hi, sum = min(lo, p.V), max(hi, p.V), sum+p.V
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\n", l.name, len(l.points), l.points[len(l.points)-1].V, lo, hi, sum/float64(len(l.points)))
	}
	return tw.Flush()
}
