package export

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// spoolMemory is how much of a spool stays in memory before it moves to a
// temporary file.
const spoolMemory = 8 << 20

// spool keeps the rows of a table between the scan and the file, because
// the header (the columns) is known only after the last row: in memory
// while small, then in a temporary file in os.TempDir, removed by close.
// Each record is the row's number of cells, the length of its payload and
// the payload, the first two as uvarints; in a raw spool it is the payload
// alone.
type spool struct {
	// limit is the most bytes kept in memory (0: spoolMemory).
	limit int
	raw   bool
	mem   []byte
	file  *os.File
	w     *bufio.Writer
	hdr   [2 * binary.MaxVarintLen64]byte
}

// put appends one record.
func (s *spool) put(cells int, payload []byte) error {
	var n int
	if !s.raw {
		n = binary.PutUvarint(s.hdr[:], uint64(cells))
		n += binary.PutUvarint(s.hdr[n:], uint64(len(payload)))
	}
	if s.w != nil {
		if _, err := s.w.Write(s.hdr[:n]); err != nil {
			return err
		}
		_, err := s.w.Write(payload)
		return err
	}
	s.mem = append(s.mem, s.hdr[:n]...)
	s.mem = append(s.mem, payload...)
	limit := s.limit
	if limit == 0 {
		limit = spoolMemory
	}
	if len(s.mem) < limit {
		return nil
	}
	f, err := os.CreateTemp("", "sluice-export-*")
	if err != nil {
		return fmt.Errorf("export: spool: %w", err)
	}
	s.file = f
	s.w = bufio.NewWriterSize(f, 256<<10)
	_, err = s.w.Write(s.mem)
	s.mem = nil
	return err
}

// reader returns a reader of every record put so far, from the first.
func (s *spool) reader() (*spoolReader, error) {
	src, err := s.rawReader()
	if err != nil {
		return nil, err
	}
	size := 64 << 10
	if s.file != nil {
		size = 256 << 10
	}
	return &spoolReader{r: bufio.NewReaderSize(src, size)}, nil
}

// rawReader returns the spool's bytes from the first: the memory, or the
// temporary file itself (so that io.Copy from it to a file or a socket can
// let the kernel copy).
func (s *spool) rawReader() (io.Reader, error) {
	if s.file == nil {
		return bytes.NewReader(s.mem), nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("export: spool: %w", err)
	}
	return s.file, nil
}

// close releases the spool and removes its file.
func (s *spool) close() {
	s.mem = nil
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
		s.file, s.w = nil, nil
	}
}

// spoolReader reads a spool's records in order.
type spoolReader struct {
	r   *bufio.Reader
	buf []byte
}

// errSpoolCorrupt reports a spool that does not read back as written.
var errSpoolCorrupt = errors.New("export: spool: truncated record")

// next returns the next record, or io.EOF after the last. The payload is
// valid until the next call.
func (r *spoolReader) next() (cells int, payload []byte, err error) {
	c, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, err // io.EOF at a record boundary: the end
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, errSpoolCorrupt
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		return 0, nil, errSpoolCorrupt
	}
	return int(c), r.buf, nil
}
