package app_test

import (
	"encoding/json"
	"strconv"
	"testing"

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
