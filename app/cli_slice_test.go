package app_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCLIKickoffAndDead: a kickoff slice processes one job now; the items
// that ended in ERROR are listed as dead letters and replayed.
func TestCLIKickoffAndDead(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("pipeline", "apply", c.file("p.json", `{"name":"picky","stages":[{"processor":"noop","config":{"permanentEvery":2}}]}`))
	var ing struct {
		JobID int64 `json:"jobId"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("ingest", c.file("a.csv", "k\n1\n2\n3\n4\n"), "--pipeline", "picky", "--json")), &ing))
	id := strconv.FormatInt(ing.JobID, 10)

	var k struct {
		Processed int64 `json:"processed"`
		Job       struct {
			State  string           `json:"state"`
			Counts map[string]int64 `json:"counts"`
		} `json:"job"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("kickoff", id, "--duration", "3s", "--json")), &k))
	require.Equal(t, int64(4), k.Processed)
	require.Equal(t, "DONE", k.Job.State)
	require.Equal(t, int64(2), k.Job.Counts["ERROR"])

	var dead struct {
		Items []struct {
			JobID  int64  `json:"jobId"`
			Status string `json:"status"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("dead", "--json")), &dead))
	require.Len(t, dead.Items, 2)
	for _, it := range dead.Items {
		require.Equal(t, ing.JobID, it.JobID)
		require.Equal(t, "ERROR", it.Status)
	}
	var rep struct {
		Replayed int64 `json:"replayed"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("dead", "--replay", "--json")), &rep))
	require.Equal(t, int64(2), rep.Replayed)
	require.NoError(t, json.Unmarshal([]byte(c.ok("dead", "--json")), &dead))
	require.Empty(t, dead.Items, "replayed items are no longer dead")

	code, _, errs := c.run("pause", id)
	require.Equal(t, 0, code, errs)
	code, _, errs = c.run("kickoff", id)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "resume it first")
}

// TestCLIKickoffKeepsInFlightLimits: a kickoff slice runs under the same
// per-job in-flight limit as every runner (SLUICE_MAX_INFLIGHT_PER_JOB):
// watched from another connection while the slice runs, the job never has
// more than 2 items PROCESSING, though 8 workers would take more. Not
// parallel: the limit comes from the environment.
func TestCLIKickoffKeepsInFlightLimits(t *testing.T) {
	t.Setenv("SLUICE_MAX_INFLIGHT_PER_JOB", "2")
	t.Setenv("SLUICE_CONCURRENCY", "8")
	c := newCLI(t)
	c.ok("pipeline", "apply", c.file("p.json", `{"name":"slow","stages":[{"processor":"noop","config":{"delayMs":100}}]}`))
	var ing struct {
		JobID int64 `json:"jobId"`
	}
	csv := "k\n" + strings.Repeat("x\n", 60)
	require.NoError(t, json.Unmarshal([]byte(c.ok("ingest", c.file("a.csv", csv), "--pipeline", "slow", "--json")), &ing))
	id := strconv.FormatInt(ing.JobID, 10)

	done := make(chan string, 1)
	go func() {
		_, out, _ := c.run("kickoff", id, "--duration", "2s", "--json")
		done <- out
	}()
	var most int64
	var out string
watch:
	for {
		select {
		case out = <-done:
			break watch
		default:
		}
		var j struct {
			Counts map[string]int64 `json:"counts"`
		}
		code, js, _ := c.run("job", id, "--json")
		if code == 0 && json.Unmarshal([]byte(js), &j) == nil {
			most = max(most, j.Counts["PROCESSING"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	var k struct {
		Processed int64 `json:"processed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &k), out)
	require.Positive(t, k.Processed)
	require.Less(t, k.Processed, int64(60), "2 at a time for 2 s at 100 ms an item finish at most 40 of 60")
	require.LessOrEqual(t, most, int64(2), "PROCESSING items seen during the slice")
	require.Equal(t, int64(2), most, "the limit is reached, so the watch saw the slice at work")
}
