//go:build linux

package app_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/app"
)

// TestCLIExportXLSXToTerminal: a workbook is not written to a terminal.
func TestCLIExportXLSXToTerminal(t *testing.T) {
	t.Parallel()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	defer tty.Close()

	c := newCLI(t)
	c.ok("ingest", c.file("p.csv", sampleCSV), "--wait")
	var errb bytes.Buffer
	code := app.Main(context.Background(), []string{"--data", c.data, "--log-level", "error",
		"export", "1", "--format", "xlsx", "-o", "-"}, tty, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "standard output is a terminal")
	// CSV to a terminal is fine.
	code = app.Main(context.Background(), []string{"--data", c.data, "--log-level", "error",
		"export", "1", "-o", "-"}, tty, &errb)
	require.Equal(t, 0, code, errb.String())
}
