package export

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParallelDeflate(t *testing.T) {
	t.Parallel()
	// Repetitive text with random stretches, across many blocks and in
	// writes of odd sizes.
	var in bytes.Buffer
	for i := 0; in.Len() < 5*deflateBlock+12345; i++ {
		fmt.Fprintf(&in, `<row r="%d"><c r="A%d" t="inlineStr"><is><t>%x</t></is></c></row>`, i, i, i*7919*i)
	}
	for _, size := range []int{0, 1, 100, 4096, len(in.Bytes())} {
		var out bytes.Buffer
		d := newParallelDeflate(&out)
		data := in.Bytes()
		if size == 0 {
			data = nil
		}
		for len(data) > 0 {
			k := min(len(data), max(1, size*3/2))
			n, err := d.Write(data[:k])
			require.NoError(t, err)
			require.Equal(t, k, n)
			data = data[k:]
		}
		require.NoError(t, d.Close())
		got, err := io.ReadAll(flate.NewReader(&out))
		require.NoError(t, err, "size %d", size)
		if size == 0 {
			require.Empty(t, got)
			continue
		}
		require.True(t, bytes.Equal(in.Bytes(), got), "size %d: the stream decompresses to the input", size)
		require.Less(t, out.Len(), in.Len()/3)
	}

	d := newParallelDeflate(failWriter{})
	var err error
	for range 20 {
		if _, err = d.Write(in.Bytes()[:deflateBlock]); err != nil {
			break
		}
	}
	require.ErrorContains(t, d.Close(), "disk full")
}
