package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// Checkpoints are shared between two connections. A checkpointer goroutine
// on its own connection runs a PASSIVE checkpoint every checkpointEvery: it
// copies committed WAL frames into the database file on the other core and
// never blocks the writer or readers. It cannot finish on its own while the
// writer keeps appending, so the writer keeps SQLite's autocheckpoint with a
// larger threshold (writerAutocheckpoint pages): by the time it fires, most
// frames are already copied, its checkpoint is short, it completes, and the
// next transaction starts the WAL over. journal_size_limit then truncates the
// file, so the WAL stays bounded during long ingests.
const (
	checkpointEvery      = 50 * time.Millisecond
	writerAutocheckpoint = 4096 // pages (16 MiB with 4 KiB pages)
)

type checkpointer struct {
	db   *sql.DB
	wal  string
	stop chan struct{}
	done chan struct{}
}

func startCheckpointer(path string, busy time.Duration) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn(path, []string{fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds())}, "deferred"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, wal: path + "-wal", stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

func (c *checkpointer) loop() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if st, err := os.Stat(c.wal); err != nil || st.Size() == 0 {
			continue
		}
		// Errors (busy, a reader holding an old snapshot) only delay the
		// checkpoint to the next tick.
		_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
	}
}

func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
