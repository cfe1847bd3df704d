package ftp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/ftp"
	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/remote/remotetest"
	"github.com/sluicehq/sluice/engine"
)

const passEnv = "SLUICE_TEST_FTP_PASSWORD_INPROC"

func config(t *testing.T, c ftp.Config) json.RawMessage {
	t.Helper()
	c.ArrivalRule.MinAgeMS = 200
	if c.Password.IsZero() {
		c.Password = remote.Secret{Env: passEnv}
	}
	require.NoError(t, c.Validate())
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	return raw
}

// localFixture is the suite's fixture on an in-process server; the files
// are in dir on this machine.
func localFixture(t *testing.T, s *server, dir string) *remotetest.Fixture {
	remotetest.SetSecret(t, passEnv, testPass)
	return &remotetest.Fixture{
		Kind:   engine.SourceFTP,
		Config: config(t, ftp.Config{URL: fmt.Sprintf("ftp://%s@%s/in", testUser, s.addr)}),
		New:    ftp.New,
		Put: func(t *testing.T, key string, data []byte) {
			// Written beside and renamed, as an FTP upload ends.
			tmp := filepath.Join(dir, "in", ".upload-"+filepath.Base(key))
			require.NoError(t, os.WriteFile(tmp, data, 0o644))
			require.NoError(t, os.Rename(tmp, filepath.Join(dir, "in", key)))
		},
		Exists: func(t *testing.T, key string) bool {
			_, err := os.Stat(filepath.Join(dir, "in", key))
			return err == nil
		},
	}
}

func TestSuiteInProcess(t *testing.T) {
	for _, noMLSD := range []bool{false, true} {
		t.Run(map[bool]string{false: "MLSD", true: "LIST"}[noMLSD], func(t *testing.T) {
			remotetest.Run(t, func(t *testing.T) *remotetest.Fixture {
				dir := t.TempDir()
				require.NoError(t, os.Mkdir(filepath.Join(dir, "in"), 0o755))
				return localFixture(t, startServer(t, "127.0.0.1:0", dir, noMLSD), dir)
			})
		})
	}
}

func newHarness(t *testing.T, addr, dir string, after string, mod func(*ftp.Config)) *remotetest.Harness {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "in"), 0o755))
	remotetest.SetSecret(t, passEnv, testPass)
	c := ftp.Config{URL: fmt.Sprintf("ftp://%s@%s/in", testUser, addr)}
	if mod != nil {
		mod(&c)
	}
	f := &remotetest.Fixture{Kind: engine.SourceFTP, Config: config(t, c), New: ftp.New}
	return remotetest.NewHarness(t, f, after)
}

func write(t *testing.T, dir, name string, n int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", name), remotetest.CSV(n), 0o644))
}

func TestServerDownAtStartIsAnErrorThenWorks(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	h := newHarness(t, addr, dir, engine.AfterMove, nil)
	write(t, dir, "a.csv", 2)
	h.Start()
	require.Eventually(t, func() bool { return h.Source().LastError != "" }, remotetest.Deadline, 10*time.Millisecond)
	require.Contains(t, h.Source().LastError, "connect to "+addr)
	require.Empty(t, h.Jobs())
	startServer(t, addr, dir, false)
	js := h.WaitJobs(1)
	require.EqualValues(t, 2, js[0].TotalItems)
	require.Eventually(t, func() bool { return h.Source().LastError == "" }, remotetest.Deadline, 10*time.Millisecond,
		"a good poll clears the error")
}

func TestDroppedDownloadIsRetriedNotHalfIngested(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, "127.0.0.1:0", dir, false)
	h := newHarness(t, s.addr, dir, engine.AfterLeave, nil)
	// One process: its interrupted claim may be given back at once.
	h.Taker.RecoverAfter = time.Millisecond
	write(t, dir, "big.csv", 500)
	s.breakNext.Store(1)
	h.Start()
	js := h.WaitJobs(1)
	require.EqualValues(t, 500, js[0].TotalItems, "the whole file, once")
	require.GreaterOrEqual(t, s.retrieved.Load(), int32(2), "downloaded again")
	objs, err := h.Store.ListSourceObjects(t.Context(), &engine.ListSourceObjectsParams{Source: h.Src.Name})
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Equal(t, engine.ObjectDone, objs[0].State)
	require.Equal(t, 2, objs[0].Attempts)
	require.Contains(t, h.Log.String(), "copy interrupted")
}

// fakeServer accepts connections and answers with script (garbage, or
// nothing at all), to see the source survive it.
func fakeServer(t *testing.T, script func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); script(c) }()
		}
	}()
	return l.Addr().String()
}

func TestGarbageAndSilentServersAreSourceErrors(t *testing.T) {
	t.Parallel()
	garbage := fakeServer(t, func(c net.Conn) {
		fmt.Fprintf(c, "HTTP/1.1 400 Bad Request\r\n\r\n\x00\xff garbage\r\n")
		_, _ = bufio.NewReader(c).ReadString('\n')
	})
	silent := fakeServer(t, func(c net.Conn) { time.Sleep(5 * time.Second) })
	for name, addr := range map[string]string{"garbage": garbage, "silent": silent} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, addr, t.TempDir(), engine.AfterMove, func(c *ftp.Config) { c.TimeoutMS = 300 })
			h.Start()
			require.Eventually(t, func() bool { return h.Source().LastError != "" }, remotetest.Deadline, 10*time.Millisecond)
			require.Contains(t, h.Source().LastError, "connect to "+addr)
			// The source keeps trying (a second failure is recorded later).
			first := *h.Source().LastPollAt
			require.Eventually(t, func() bool { return h.Source().LastPollAt.After(first) }, remotetest.Deadline, 10*time.Millisecond)
		})
	}
}

func TestWrongPasswordAndMissingSecretAreClear(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, "127.0.0.1:0", dir, false)
	h := newHarness(t, s.addr, dir, engine.AfterMove, func(c *ftp.Config) {
		c.Password = remote.Secret{Env: "SLUICE_TEST_FTP_UNSET_VARIABLE"}
	})
	_, err := h.Poller().Scan(t.Context())
	require.ErrorContains(t, err, "environment variable SLUICE_TEST_FTP_UNSET_VARIABLE is not set")
	require.Contains(t, h.Source().LastError, "SLUICE_TEST_FTP_UNSET_VARIABLE")

	file := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(file, []byte("wrong\n"), 0o644))
	h = newHarness(t, s.addr, dir, engine.AfterMove, func(c *ftp.Config) { c.Password = remote.Secret{File: file} })
	_, err = h.Poller().Scan(t.Context())
	require.ErrorContains(t, err, "must be readable by its owner only")
	require.NoError(t, os.Chmod(file, 0o600))
	_, err = h.Poller().Scan(t.Context())
	require.ErrorContains(t, err, "log in to "+s.addr+" as "+testUser)
}

func TestHostileNamesNeverLeaveTheDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, "127.0.0.1:0", dir, false)
	h := newHarness(t, s.addr, dir, engine.AfterMove, nil)
	for _, n := range []string{"..csv", "a..b.csv", "tab\there.csv", "ünï cødé 名前.csv", "-rf .csv"} {
		write(t, dir, n, 1)
	}
	res, err := h.Poller().Scan(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3, res.Ingested, "plain names in any script are taken")
	require.Contains(t, h.Source().LastError, "unsafe name", "a control character is reported, not taken")
	for _, n := range []string{"a..b.csv", "ünï cødé 名前.csv", "-rf .csv"} {
		require.FileExists(t, filepath.Join(dir, "in", "done", n))
	}
	require.FileExists(t, filepath.Join(dir, "in", "..csv"), "a dotfile is ignored")
	require.FileExists(t, filepath.Join(dir, "in", "tab\there.csv"))
	// Nothing was written beside the data folder.
	ents, err := os.ReadDir(filepath.Dir(filepath.Dir(filepath.Dir(h.Taker.TempDir))))
	require.NoError(t, err)
	for _, e := range ents {
		require.Contains(t, []string{"data"}, e.Name())
	}
}

func TestConfigRefusesPasswordInURL(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"ftp://u:secret@h/in":  "holds a password",
		"http://h/":            "want ftp://",
		"ftp:///in":            "no host",
		"ftp://u@h/in?x=1":     "no query",
		"ftps://u@h:2121/drop": "",
	} {
		err := (&ftp.Config{URL: url}).Validate()
		if want == "" {
			require.NoError(t, err, url)
			continue
		}
		require.ErrorContains(t, err, want, url)
		require.NotContains(t, err.Error(), "secret", "the error does not repeat the password")
	}
}

func TestExplicitFTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "in"), 0o755))
	s := startDriver(t, &driver{dir: dir, addr: "127.0.0.1:0", cert: selfSigned(t)})
	write(t, dir, "tls.csv", 4)
	for insecure, want := range map[bool]string{false: "certificate", true: ""} {
		h := newHarness(t, s.addr, dir, engine.AfterLeave, func(c *ftp.Config) {
			c.URL = strings.Replace(c.URL, "ftp://", "ftps://", 1)
			c.InsecureSkipVerify = insecure
		})
		res, err := h.Poller().Scan(t.Context())
		if want != "" {
			require.ErrorContains(t, err, want, "a certificate nobody signed is refused")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, res.Ingested)
		require.EqualValues(t, 4, h.Jobs()[0].TotalItems)
	}
}
