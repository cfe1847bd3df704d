package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// manyItems returns n DONE items of testJob with a small result each.
func manyItems(n int) []*engine.Item {
	items := make([]*engine.Item, n)
	for i := range items {
		items[i] = item(int64(i+1), engine.ItemDone, fmt.Sprintf(`{"n":%d}`, i+1))
	}
	return items
}

// readCSV parses CSV text with encoding/csv.
func readCSV(t *testing.T, text string) [][]string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	require.NoError(t, err)
	return records
}

func TestWriteCSV(t *testing.T) {
	t.Parallel()
	errItem := item(3, engine.ItemError, "")
	errItem.Attempts = 3
	errItem.LastError = "=HYPERLINK(\"http://x\")\nline 2"
	s := &fakeStore{items: []*engine.Item{
		item(2, engine.ItemPending, ""),
		item(1, engine.ItemDone, `{"name":"Smith, John","note":"say \"hi\"\nbye","price":1.50,"neg":-5,`+
			`"formula":"=SUM(A1)","plus":"+1","minus":"-x","at":"@cmd","plain":"plain","tags":["a","b"],`+
			`"nothing":null,"big":-1e999,"=evil":"key"}`),
		errItem,
		item(4, engine.ItemDone, `{"price":"-5","minus":"-","extra":true}`),
	}}
	var buf bytes.Buffer
	n, err := WriteCSV(context.Background(), s, testJob, nil, &buf)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	require.Equal(t, 1, s.scans, "one pass finds the columns and renders the rows")
	require.NotContains(t, buf.String(), "\r\n", "lines end in \\n")
	require.True(t, strings.HasPrefix(buf.String(), "Seq,Status,Attempts,Error,name,"), "no byte-order mark")

	require.Equal(t, [][]string{
		{"Seq", "Status", "Attempts", "Error", "name", "note", "price", "neg", "formula", "plus", "minus", "at", "plain", "tags", "nothing", "big", "'=evil", "extra"},
		{"1", "DONE", "0", "", "Smith, John", "say \"hi\"\nbye", "1.50", "-5", "'=SUM(A1)", "+1", "'-x", "'@cmd", "plain", `["a","b"]`, "", "-1e999", "key", ""},
		{"2", "PENDING", "0", "", "", "", "", "", "", "", "", "", "", "", "", "", "", ""},
		{"3", "ERROR", "3", "'=HYPERLINK(\"http://x\")\nline 2", "", "", "", "", "", "", "", "", "", "", "", "", "", ""},
		{"4", "DONE", "0", "", "", "", "-5", "", "", "", "'-", "", "", "", "", "", "", "true"},
	}, readCSV(t, buf.String()))

	// The raw text: quoting of commas, quotes and newlines.
	lines := strings.SplitN(buf.String(), "\n", 2)
	require.Contains(t, lines[1], `"Smith, John","say ""hi""`+"\n"+`bye",1.50,-5,'=SUM(A1),+1,'-x,'@cmd,plain,"[""a"",""b""]",,-1e999,key,`)
}

func TestWriteCSVStatuses(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: []*engine.Item{
		item(1, engine.ItemDone, `{"done":1}`),
		item(2, engine.ItemError, `{"e":"x"}`),
		item(3, engine.ItemNotFound, ""),
		item(4, engine.ItemError, `{"e":"y"}`),
		item(5, engine.ItemSkipped, `{"skip":1}`),
	}}
	var buf bytes.Buffer
	n, err := WriteCSV(context.Background(), s, testJob, []engine.ItemStatus{engine.ItemError, engine.ItemNotFound}, &buf)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Equal(t, [][]string{
		{"Seq", "Status", "Attempts", "Error", "e"},
		{"2", "ERROR", "0", "", "x"},
		{"3", "NOT_FOUND", "0", "", ""},
		{"4", "ERROR", "0", "", "y"},
	}, readCSV(t, buf.String()))
}

func TestWriteCSVEmpty(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n, err := WriteCSV(context.Background(), &fakeStore{items: manyItems(3)}, testJob+1, nil, &buf)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, "Seq,Status,Attempts,Error\n", buf.String())
}

func TestWriteCSVContextCancel(t *testing.T) {
	t.Parallel()
	const total = 1000
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeStore{items: manyItems(total)}
	s.onItem = func(visited int) {
		if visited == 10 {
			cancel()
		}
	}
	var buf bytes.Buffer
	n, err := WriteCSV(ctx, s, testJob, nil, &buf)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, n)
	require.Equal(t, 10, s.visited, "the scan stops at the cancelled item")
	require.Empty(t, buf.String(), "nothing is written before the pass is complete")
}

func TestWriteCSVCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &fakeStore{items: manyItems(10)}
	var buf bytes.Buffer
	n, err := WriteCSV(ctx, s, testJob, nil, &buf)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, n)
	require.Equal(t, 1, s.visited)
	require.Empty(t, buf.String())
}

func TestWriteCSVBadResult(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: append(manyItems(2), item(3, engine.ItemDone, `{"n":`))}
	var buf bytes.Buffer
	n, err := WriteCSV(context.Background(), s, testJob, nil, &buf)
	require.ErrorContains(t, err, "seq 3")
	require.Zero(t, n)
	require.Empty(t, buf.String(), "nothing is written before the pass is complete")
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteCSVWriteError(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: manyItems(5000)}
	_, err := WriteCSV(context.Background(), s, testJob, nil, failWriter{})
	require.ErrorContains(t, err, "disk full")
}

func TestSpoolSpillsToFile(t *testing.T) {
	t.Parallel()
	s := &spool{limit: 1000}
	defer s.close()
	var want [][]byte
	for i := range 500 {
		rec := []byte(strings.Repeat(fmt.Sprint(i), i%7))
		want = append(want, rec)
		require.NoError(t, s.put(i, rec))
	}
	require.NotNil(t, s.file, "past the limit the spool is a file")
	name := s.file.Name()
	r, err := s.reader()
	require.NoError(t, err)
	for i, w := range want {
		cells, rec, err := r.next()
		require.NoError(t, err)
		require.Equal(t, i, cells)
		require.Equal(t, string(w), string(rec))
	}
	_, _, err = r.next()
	require.ErrorIs(t, err, io.EOF)
	s.close()
	_, err = os.Stat(name)
	require.True(t, os.IsNotExist(err), "close removes the file")
}

// TestWriteCSVLargeJob exports a job whose rows do not fit the spool's
// memory, with columns that appear late, and compares with Cells.
func TestWriteCSVLargeJob(t *testing.T) {
	t.Parallel()
	const n = 40000
	s := &fakeStore{}
	for i := 1; i <= n; i++ {
		r := fmt.Sprintf(`{"name":"item %d %s","n":%d`, i, strings.Repeat("x", 200), i)
		switch i % 1000 {
		case 1: // a field over lines, quotes, and a line longer than the reader's buffer
			r += fmt.Sprintf(`,"note":"say \"hi\"\nto %d\n\"\"","long":"%s"`, i, strings.Repeat("\\\"y,\\n", 20000))
		}
		if i%10000 == 0 {
			r += fmt.Sprintf(`,"late%d":"=%d"`, i, i)
		}
		s.items = append(s.items, item(int64(i), engine.ItemDone, r+"}"))
	}
	want := expectedTable(t, s, nil)
	require.Len(t, want[0], 4+4+4, "six columns appear late")
	var buf bytes.Buffer
	rows, err := WriteCSV(context.Background(), s, testJob, nil, &buf)
	require.NoError(t, err)
	require.Equal(t, int64(n), rows)
	require.Greater(t, buf.Len(), spoolMemory, "the rows went through a file")
	requireSameRows(t, want, readCSV(t, buf.String()), "CSV")

	// To a file, the complete rows are copied from the spool's file by
	// the kernel (copy_file_range), through a bufio.Writer as the CLI
	// writes: the same bytes.
	f, err := os.CreateTemp(t.TempDir(), "export-*.csv")
	require.NoError(t, err)
	defer f.Close()
	bw := bufio.NewWriterSize(f, 256<<10)
	rows, err = WriteCSV(context.Background(), s, testJob, nil, bw)
	require.NoError(t, err)
	require.NoError(t, bw.Flush())
	require.Equal(t, int64(n), rows)
	got, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.Equal(t, buf.String(), string(got))
}

func TestReadCSVLine(t *testing.T) {
	t.Parallel()
	records := [][]string{{"a", "b"}, {"x\ny", `say "hi"`}, {`"`, "\n", ""}, {strings.Repeat("\"\n,", 30000)}, {"last"}}
	var text []byte
	for _, r := range records {
		text = appendCSVLine(text, r)
	}
	br := bufio.NewReaderSize(bytes.NewReader(text), 16)
	var rec []byte
	for _, want := range records {
		var err error
		rec, err = readCSVLine(br, rec[:0])
		require.NoError(t, err)
		require.Equal(t, string(appendCSVLine(nil, want)), string(rec))
	}
	_, err := readCSVLine(br, nil)
	require.ErrorIs(t, err, errSpoolCorrupt, "no record past the end")
}

// TestAppendCSVMatchesEncodingCSV: records are byte for byte what
// encoding/csv's Writer writes, for tricky fields and random ones.
func TestAppendCSVMatchesEncodingCSV(t *testing.T) {
	t.Parallel()
	fields := []string{"", "plain", "a,b", `say "hi"`, `"`, `""`, "line\nbreak", "cr\rhere", "crlf\r\n",
		" lead", "\tlead", "\u00a0nbsp", "\u3000ideo", "trail ", `\.`, `\.x`, "'=SUM(A1)", "café 日本 🙂",
		"bad\xffutf8", "\xff", ",", "\n", "x\"y\"z"}
	var records [][]string
	for _, f := range fields {
		records = append(records, []string{f}, []string{f, f}, []string{"a", f, ""})
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", " ", ",", `"`, "\n", "\r", "\t", "é", `\`, ".", "\u00a0", "\xff"}
	for range 2000 {
		rec := make([]string, 1+rnd.IntN(5))
		for i := range rec {
			var b strings.Builder
			for range rnd.IntN(6) {
				b.WriteString(alphabet[rnd.IntN(len(alphabet))])
			}
			rec[i] = b.String()
		}
		records = append(records, rec)
	}
	for _, rec := range records {
		var want bytes.Buffer
		w := csv.NewWriter(&want)
		require.NoError(t, w.Write(rec))
		w.Flush()
		require.Equal(t, want.String(), string(appendCSV(nil, rec))+"\n", "%q", rec)
	}
}
