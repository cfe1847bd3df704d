package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// inflightTests cover the in-flight limits of ClaimItems
// (ClaimItemsParams.MaxInFlightPerJob and MaxInFlightPerUser).
var inflightTests = []subtest{
	{"PerJob", testInFlightPerJob},
	{"PerUser", testInFlightPerUser},
	{"PerUserDoesNotBlockSlots", testInFlightPerUserSlots},
}

// claimLimited claims like claim, with in-flight limits and maxJobs.
func (e *env) claimLimited(worker string, limit, perJob, perUser, maxJobs int) []*engine.Item {
	e.t.Helper()
	items, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{
		WorkerID: worker, Limit: limit, MaxJobs: maxJobs, LeaseFor: defaultLease, Now: e.now(),
		MaxInFlightPerJob: perJob, MaxInFlightPerUser: perUser,
	})
	require.NoError(e.t, err, "ClaimItems")
	return items
}

// ownedBy makes the job belong to user.
func ownedBy(u *engine.User) jobOpt {
	return func(p *engine.CreateJobParams) { p.UserID = u.ID }
}

// priority sets the job's priority.
func priority(n int) jobOpt {
	return func(p *engine.CreateJobParams) { p.Priority = n }
}

// testInFlightPerJob: a job at its in-flight limit gets nothing more, from
// any worker, until items complete; another job is not held back by it.
func testInFlightPerJob(t *testing.T, e *env) {
	a := e.queuedJob(20)
	got := e.claimLimited("w1", 100, 3, 0, 0)
	require.Len(t, got, 3, "no more than the limit")
	require.Empty(t, e.claimLimited("w2", 100, 3, 0, 0), "the job is at its limit across workers")
	require.Equal(t, int64(3), e.job(a.ID).Counts.Processing)

	b := e.queuedJob(20)
	other := e.claimLimited("w2", 100, 3, 0, 0)
	require.Len(t, other, 3, "another job gets its own limit")
	require.Equal(t, b.ID, other[0].JobID)

	e.completeAll("w1", got[:2], engine.ItemDone)
	again := e.claimLimited("w1", 100, 3, 0, 0)
	require.Len(t, again, 2, "completed items free their places")
	for _, it := range again {
		require.Equal(t, a.ID, it.JobID)
	}
	require.Len(t, e.claimLimited("w1", 100, 0, 0, 0), 15+17, "without a limit the rest is claimed")
}

// testInFlightPerUser: a user with three big jobs cannot take more than the
// per-user limit, while another user's job gets its share and more.
func testInFlightPerUser(t *testing.T, e *env) {
	ana := e.addUser("ana", engine.RoleUser)
	bo := e.addUser("bo", engine.RoleUser)
	var anaJobs []int64
	for range 3 {
		anaJobs = append(anaJobs, e.queuedJob(100, ownedBy(ana)).ID)
	}
	boJob := e.queuedJob(200, ownedBy(bo)).ID

	count := func(items []*engine.Item) (anaN, boN int) {
		for _, it := range items {
			if it.JobID == boJob {
				boN++
			} else {
				require.Contains(t, anaJobs, it.JobID)
				anaN++
			}
		}
		return anaN, boN
	}
	first := e.claimLimited("w1", 40, 0, 10, 0)
	anaN, boN := count(first)
	require.Equal(t, 10, anaN, "ana's three jobs share her limit")
	require.Equal(t, 10, boN, "bo's one job gets its share of four jobs")
	require.Empty(t, e.claimLimited("w2", 40, 0, 10, 0), "both users are at the limit, across workers")

	var anaProcessing int64
	for _, id := range anaJobs {
		anaProcessing += e.job(id).Counts.Processing
	}
	require.Equal(t, int64(10), anaProcessing)

	var anaItems []*engine.Item
	for _, it := range first {
		if it.JobID != boJob {
			anaItems = append(anaItems, it)
		}
	}
	e.completeAll("w1", anaItems[:2], engine.ItemDone)
	anaN, boN = count(e.claimLimited("w1", 40, 0, 10, 0))
	require.Equal(t, 2, anaN, "completed items free her places")
	require.Zero(t, boN)
}

// testInFlightPerUserSlots: jobs of a user at the limit do not take the
// claim's job slots from other users' jobs.
func testInFlightPerUserSlots(t *testing.T, e *env) {
	ana := e.addUser("ana", engine.RoleUser)
	bo := e.addUser("bo", engine.RoleUser)
	for range 3 {
		e.queuedJob(50, ownedBy(ana), priority(1))
	}
	boJob := e.queuedJob(50, ownedBy(bo))

	first := e.claimLimited("w1", 30, 0, 4, 3)
	require.Len(t, first, 4, "ana's higher-priority jobs fill the three slots, up to her limit")
	for _, it := range first {
		require.NotEqual(t, boJob.ID, it.JobID)
	}
	second := e.claimLimited("w1", 30, 0, 4, 3)
	require.Len(t, second, 4, "ana at her limit leaves the slots to bo")
	for _, it := range second {
		require.Equal(t, boJob.ID, it.JobID)
	}
}
