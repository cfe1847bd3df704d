package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// startServe runs `sluice --serve` on a free port and returns the base URL
// and what it printed before the first request.
func startServe(t *testing.T, bin, data string, env []string, args ...string) (base string, intro []string, wait func() error, stop func()) {
	t.Helper()
	cmd := sluiceCmd(bin, data, env, append([]string{"--serve", "--addr", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(20 * time.Second)
	var more <-chan time.Time
collect:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break collect
			}
			intro = append(intro, line)
			if i := strings.Index(line, "serving http://"); i >= 0 {
				base = strings.Fields(line[i+len("serving "):])[0]
				// The sign-in lines, when there are any, come in the same
				// write (cmd_serve); the wait only gives the scanner time.
				more = time.After(500 * time.Millisecond)
			}
		case <-more:
			break collect
		case <-timeout:
			break collect
		}
	}
	require.NotEmpty(t, base, "no serving line; stderr: %s", stderr.String())
	go func() {
		for range lines {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	wait = func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			t.Fatalf("sluice --serve did not stop; stderr: %s", stderr.String())
			return nil
		}
	}
	stop = func() { _ = cmd.Process.Signal(syscall.SIGTERM) }
	return base, intro, wait, stop
}

// signInWithLink follows the one-time sign-in link a first start printed
// and returns the session cookie and the CSRF token of the local admin.
func signInWithLink(t *testing.T, base string, intro []string) (*http.Cookie, string) {
	t.Helper()
	var link string
	for _, l := range intro {
		if strings.Contains(l, "/signin?token=") {
			link = strings.TrimSpace(l)
		}
	}
	require.NotEmpty(t, link, "first start prints a sign-in link: %q", intro)
	require.True(t, strings.HasPrefix(link, base+"/signin?token="))

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "sluice_session" {
			session = c
		}
	}
	require.NotNil(t, session)

	req, _ := http.NewRequest("GET", base+"/api/me", nil)
	req.AddCookie(session)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	var me struct {
		User      struct{ Name string } `json:"user"`
		CSRFToken string                `json:"csrfToken"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&me))
	resp.Body.Close()
	require.Equal(t, "local", me.User.Name)

	return session, me.CSRFToken
}

// uploadCSV posts a CSV file as rows.csv to POST /api/jobs (on pipeline,
// or the default when empty) and returns the new job's id.
func uploadCSV(t *testing.T, base string, session *http.Cookie, csrf, pipeline, content string) int64 {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if pipeline != "" {
		require.NoError(t, mw.WriteField("pipeline", pipeline))
	}
	fw, err := mw.CreateFormFile("file", "rows.csv")
	require.NoError(t, err)
	_, _ = fw.Write([]byte(content))
	require.NoError(t, mw.Close())
	req, _ := http.NewRequest("POST", base+"/api/jobs", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", csrf)
	req.AddCookie(session)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	var created struct {
		JobID int64 `json:"jobId"`
	}
	require.NoError(t, json.Unmarshal(body, &created))
	require.Positive(t, created.JobID, "%s", body)
	return created.JobID
}

// TestServeFirstStartLinkAndGracefulStop: the first start prints a
// one-time sign-in link that signs a browser in; an upload answers with a
// durable job; SIGTERM stops the server cleanly while items run, and
// nothing is left PROCESSING.
func TestServeFirstStartLinkAndGracefulStop(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	data := t.TempDir()
	pipe := filepath.Join(data, "slow.json")
	require.NoError(t, os.WriteFile(pipe, []byte(`{"name":"slow","stages":[{"processor":"noop","config":{"delayMs":200}}]}`), 0o600))
	run(t, sluiceCmd(bin, data, nil, "pipeline", "apply", pipe))

	base, intro, wait, stop := startServe(t, bin, data, nil, "--concurrency", "2")
	session, csrf := signInWithLink(t, base, intro)

	var rows strings.Builder
	rows.WriteString("sku\n")
	for i := range 40 {
		rows.WriteString("S" + string(rune('a'+i%26)) + "\n")
	}
	uploadCSV(t, base, session, csrf, "slow", rows.String())

	time.Sleep(700 * time.Millisecond) // some items are running
	stop()
	require.NoError(t, wait(), "SIGTERM is a clean exit")

	db := openDB(t, data)
	require.Zero(t, count(t, db, `SELECT COUNT(*) FROM job_items WHERE status = `+stored(engine.ItemProcessing)), "no item is left PROCESSING after a graceful stop")
	require.Equal(t, int64(40), count(t, db, `SELECT COUNT(*) FROM job_items`))
	require.Positive(t, count(t, db, `SELECT COUNT(*) FROM job_items WHERE status = `+stored(engine.ItemDone)))
	requireCountersMatch(t, db)
}

// TestServeRefusesOpenAddressWithoutAdminPassword: listening beyond
// loopback needs an admin with a password.
func TestServeRefusesOpenAddressWithoutAdminPassword(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	data := t.TempDir()
	out, err := sluiceCmd(bin, data, nil, "--serve", "--addr", "0.0.0.0:0").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "sluice user add NAME --admin --password-stdin")

	add := sluiceCmd(bin, data, nil, "user", "add", "root", "--admin", "--password-stdin", "--json")
	add.Stdin = strings.NewReader("a long enough password\n")
	var created struct {
		User  struct{ Name, Role string } `json:"user"`
		Token string                      `json:"token"`
	}
	require.NoError(t, json.Unmarshal([]byte(run(t, add)), &created))
	require.Equal(t, "admin", created.User.Role)
	require.True(t, strings.HasPrefix(created.Token, "slc_"))

	base, intro, wait, stop := startServe(t, bin, data, nil)
	for _, l := range intro {
		require.NotContains(t, l, "/signin?token=", "no sign-in link once an account can sign in")
	}
	req, _ := http.NewRequest("GET", base+"/api/me", nil)
	req.Header.Set("Authorization", "Bearer "+created.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	stop()
	require.NoError(t, wait())
}
