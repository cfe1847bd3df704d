package engine

// Helpers the stores share to claim a job's items in stage order under
// the stages' global in-flight limits (ClaimItemsParams.StageLimits).

// StageBudgets holds how many more items each bounded stage may have in
// flight: pipeline → stage → items left. Stages not in it are unbounded.
type StageBudgets map[string]map[int]int

// NewStageBudgets starts the budgets at the limits; the store then takes
// the items already PROCESSING off with Spend.
func NewStageBudgets(limits []StageLimit) StageBudgets {
	if len(limits) == 0 {
		return nil
	}
	b := StageBudgets{}
	for _, l := range limits {
		if b[l.Pipeline] == nil {
			b[l.Pipeline] = map[int]int{}
		}
		b[l.Pipeline][l.Stage] = l.Max
	}
	return b
}

// Pipelines lists the pipelines with a bounded stage.
func (b StageBudgets) Pipelines() []string {
	out := make([]string, 0, len(b))
	for p := range b {
		out = append(out, p)
	}
	return out
}

// Spend takes n items off the budget of a stage (if bounded).
func (b StageBudgets) Spend(pipeline string, stage, n int) {
	if left, ok := b[pipeline][stage]; ok {
		b[pipeline][stage] = left - n
	}
}

// AllStages, as the stage given to ClaimInStageOrder's claim, means "due
// items of any stage": the job has none past stage 0.
const AllStages = -1

// ClaimInStageOrder claims up to limit due items of one job of pipeline,
// earlier stages first: stage 0, then each later stage that has PENDING
// items, in order (nextLater(k) returns the smallest such stage above k).
// Each stage takes no more than its budget allows. claim takes up to n due
// items of a stage and returns how many it took; a job with nothing past
// stage 0 and no bound on stage 0 (every single-stage job) gets one call
// with AllStages, the claim of a job without stages.
func ClaimInStageOrder(limit int, pipeline string, budgets StageBudgets,
	nextLater func(after int) (stage int, ok bool, err error), claim func(stage, n int) (int, error)) (int, error) {
	first, any, err := nextLater(0)
	if err != nil {
		return 0, err
	}
	if _, bounded := budgets[pipeline][0]; !any && !bounded {
		return claim(AllStages, limit)
	}
	took := 0
	stage := 0
	for took < limit {
		n := limit - took
		if left, bounded := budgets[pipeline][stage]; bounded {
			n = min(n, left)
		}
		if n > 0 {
			got, err := claim(stage, n)
			if err != nil {
				return took, err
			}
			budgets.Spend(pipeline, stage, got)
			took += got
		}
		if took >= limit {
			break
		}
		next, ok := first, any
		if stage > 0 {
			if next, ok, err = nextLater(stage); err != nil {
				return took, err
			}
		}
		if !ok {
			break
		}
		stage = next
	}
	return took, nil
}
