package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

func TestArrivalRuleIgnored(t *testing.T) {
	r := engine.ArrivalRule{Ignore: []string{"*.bak", "drafts/*"}}
	require.NoError(t, r.Validate())
	for _, k := range []string{"a.part", "a.csv.partial", "x.tmp", "d.crdownload", "~$book.xlsx", ".hidden.csv",
		"sub/.x.csv", "old.bak", "drafts/a.csv"} {
		require.True(t, r.Ignored(k), k)
	}
	for _, k := range []string{"a.csv", "sub/a b é.csv", "part.csv", "tmp/a.csv", "book~$.xlsx"} {
		require.False(t, r.Ignored(k), k)
	}
	require.Error(t, engine.ArrivalRule{Ignore: []string{"[x"}}.Validate())
}

func TestStability(t *testing.T) {
	r := engine.ArrivalRule{MinAgeMS: 1000}
	require.Equal(t, time.Second, r.MinAge())
	require.Equal(t, engine.DefaultMinAge, engine.ArrivalRule{}.MinAge())
	s := engine.NewStability(r)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	info := engine.ObjectInfo{Key: "a.csv", Size: 10, MTime: t0}

	ok, wait := s.Look(info, t0)
	require.False(t, ok, "one look is never enough")
	require.Equal(t, time.Second, wait)
	ok, wait = s.Look(info, t0.Add(400*time.Millisecond))
	require.False(t, ok, "a second look inside the window")
	require.Equal(t, 600*time.Millisecond, wait)
	grown := info
	grown.Size = 20
	ok, _ = s.Look(grown, t0.Add(1500*time.Millisecond))
	require.False(t, ok, "it grew: the window starts again")
	ok, wait = s.Look(grown, t0.Add(2*time.Second))
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait)
	ok, _ = s.Look(grown, t0.Add(2500*time.Millisecond))
	require.True(t, ok, "unchanged across two looks a window apart")
	require.Equal(t, []string{"a.csv"}, s.Pending())
	s.Forget("a.csv")
	require.Empty(t, s.Pending())

	young := engine.ObjectInfo{Key: "b.csv", Size: 1, MTime: t0.Add(1500 * time.Millisecond)}
	s.Look(young, t0)
	ok, wait = s.Look(young, t0.Add(2*time.Second))
	require.False(t, ok, "an mtime younger than the window waits")
	require.Equal(t, 500*time.Millisecond, wait)

	// A server's clock or a listing in its local time zone can put an
	// mtime in the future: it must not hold the object back for hours.
	skewed := engine.ObjectInfo{Key: "c.csv", Size: 1, MTime: t0.Add(2 * time.Hour)}
	s.Look(skewed, t0)
	ok, _ = s.Look(skewed, t0.Add(time.Second))
	require.True(t, ok, "an mtime in the future: two looks a window apart decide")
}
