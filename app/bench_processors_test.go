package app_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The processor benchmarks stay runnable: each runs end to end in a tiny
// configuration (seconds, a few items, small images) and reports the
// figures its documentation names. Nothing here is timed; the targets are
// the benchmarks' business.
func TestBenchProcessorsRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs four small benchmarks")
	}
	t.Parallel()
	bin := buildBinary(t)
	out := run(t, sluiceCmd(bin, t.TempDir(), nil, "bench", "--json",
		"--only", "hostlimit,latencyjump,stages,images",
		"--host-for", "3s", "--host-warmup", "1s", "--restart-for", "1s",
		"--jump-before", "2s", "--jump-after", "2s",
		"--stage-items", "200", "--stage-rounds", "1",
		"--images", "3", "--image-size", "64x48"))
	var got struct {
		Results []struct {
			Name    string             `json:"name"`
			Figures map[string]float64 `json:"figures"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	byName := map[string]map[string]float64{}
	for _, r := range got.Results {
		byName[r.Name] = r.Figures
	}
	require.Len(t, byName, 4, out)

	h := byName["hostlimit"]
	require.Positive(t, h["okPerSec"], out)
	require.Positive(t, h["itemsDone"])
	require.Contains(t, h, "share429Pct")
	require.Contains(t, h, "restartOKPerSec")
	require.Positive(t, h["restoredRate"], "the restart restored the rate the first run saved")
	require.Zero(t, h["stale"])

	j := byName["latencyjump"]
	require.Positive(t, j["itemsBefore"], out)
	require.Positive(t, j["itemsAfter"])
	require.Greater(t, j["avgItemMsAfter"], j["avgItemMsBefore"], "the jump shows in the item time")
	require.Zero(t, j["leaseExpiredWhileWorked"])
	require.Zero(t, j["reaped"])
	require.Zero(t, j["stale"])

	s := byName["stages"]
	require.Equal(t, 200.0, s["items"])
	require.Positive(t, s["singleItemsPerSec"])
	require.Positive(t, s["threeStageItemsPerSec"])

	i := byName["images"]
	require.Equal(t, 3.0, i["images"])
	require.Equal(t, 3.0, i["thumbnails"], "every image has its own thumbnail")
	require.Positive(t, i["peakRssMB"])
}
