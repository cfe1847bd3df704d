package app

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
)

// On two shared cores the wall clock of the PostgreSQL benchmarks moves
// with whatever else runs; the CPU each side spends per item moves much
// less, so the benchmark reports it too: the server's (read from /proc
// when the server runs on this machine) and the workers'.

// serverCPUMeter returns a function telling how many CPU-seconds the
// PostgreSQL server at url used since the call: its postmaster and every
// process it started (backends, including those that ended meanwhile,
// the WAL writer, the checkpointer, autovacuum). ok is false when the
// server is not on this machine or its processes cannot be read.
func serverCPUMeter(ctx context.Context, url string) (since func() float64, ok bool) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil || !localHost(cfg.Host) {
		return nil, false
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return nil, false
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, false
	}
	p, err := fs.Proc(backend)
	if err != nil {
		return nil, false
	}
	st, err := p.Stat()
	if err != nil || st.Comm != "postgres" {
		return nil, false
	}
	postmaster := st.PPID
	start, err := treeCPU(fs, postmaster)
	if err != nil {
		return nil, false
	}
	return func() float64 {
		now, err := treeCPU(fs, postmaster)
		if err != nil {
			return 0
		}
		return now - start
	}, true
}

// localHost reports whether a connection's host is this machine: a
// loopback address, localhost or a Unix socket folder.
func localHost(host string) bool {
	if host == "localhost" || (host != "" && host[0] == '/') {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// Linux; procfs converts utime and stime with the same figure).
const userHZ = 100

// treeCPU sums the CPU-seconds of process pid, of the children it
// reaped, and of its living children.
func treeCPU(fs procfs.FS, pid int) (float64, error) {
	p, err := fs.Proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	total := st.CPUTime() + float64(st.CUTime+st.CSTime)/userHZ
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, err
	}
	for _, c := range procs {
		cs, err := c.Stat()
		if err != nil || cs.PPID != pid {
			continue // ended meanwhile (its time is in the parent's), or not a child
		}
		total += cs.CPUTime() + float64(cs.CUTime+cs.CSTime)/userHZ
	}
	return total, nil
}
