package hostlimit

// Restore sets host's learned state after a restart: like Seed (rate and
// concurrency, clamped to the Config bounds, a full bucket, no slow start),
// and it also restores the ceiling, the rate of the host's last 429. After
// a decrease the host then climbs back quickly towards 90% of that
// ceiling, as it would have in the process that learned it, rather than
// towards the restored rate. A ceiling ≤ 0 means none is known: the
// restored rate serves as the ceiling, as with Seed.
func (l *Limiter) Restore(host string, rate, ceiling float64, concurrency int) {
	l.Seed(host, rate, concurrency)
	if rate <= 0 || ceiling <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hostLocked(host, l.cfg.Now()).ceiling = clampF(ceiling, l.cfg.MinRate, l.cfg.MaxRate)
}
