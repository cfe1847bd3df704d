package engine

import "time"

// Shedding: the look-ahead (see lookAhead) bounds what a claim takes, but
// items claimed before the item time rose stay queued at the old pace. When
// a vendor slows from 20 ms to 500 ms an answer, the ~2 claims of 175 items
// taken at 20 ms are ~20 s of work for 8 workers: the worker would hold them
// (renewing their leases) and claim nothing, other workers could not take
// them, and a job submitted meanwhile would wait behind them. So when the
// queue holds far more than a claim would now take, the producer gives the
// excess back to the store (PENDING, due now, no attempt charged) and
// claims again at the new size when its turn comes.

const (
	// shedFactor: shed once more than shedFactor claims' worth (plus one
	// item per worker) is queued; normally at most two claims are.
	shedFactor = 4
	// shedEvery bounds how often the producer sheds, so that a noisy item
	// time cannot make it release and reclaim in a loop.
	shedEvery = time.Second
)

// shedState is the producer's memory of its last shedding.
type shedState struct {
	last time.Time
}

// shed gives back the queued, unstarted items beyond one claim's worth when
// more than shedFactor claims' worth is queued. It is called by the
// producer, the only sender on work.
func (s *shedState) shed(r *Runner, work chan *Item) {
	size := r.lookAhead(r.claim.Size())
	queued := len(work)
	if queued <= shedFactor*size+r.cfg.Concurrency || time.Since(s.last) < shedEvery {
		return
	}
	s.last = time.Now()
	// Take the queue out, keep its head (the items that would start
	// first), put the head back and release the rest. Workers keep taking
	// items meanwhile; whatever they took is simply not shed.
	var kept, back []*Item
take:
	for range queued {
		select {
		case it := <-work:
			if len(kept) < size {
				kept = append(kept, it)
			} else {
				back = append(back, it)
			}
		default:
			break take
		}
	}
	for _, it := range kept {
		work <- it // cannot block: these slots were just freed
	}
	if len(back) > 0 {
		r.log.Info("item time rose: giving back queued items beyond the look-ahead",
			"released", len(back), "kept", len(kept), "avg_item", r.claim.AvgItem(), "claim_size", size)
		r.releaseUnstarted(back)
	}
}
