package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

func compile(t *testing.T, d *engine.Definition) *engine.Command {
	t.Helper()
	c, err := d.Compile()
	require.NoError(t, err)
	return c
}

func TestCommandArgvFromTemplatesNoShell(t *testing.T) {
	t.Parallel()
	c := compile(t, &engine.Definition{Key: "hello", Executable: "/bin/echo", Args: []string{"hello", "{{.name}}"},
		ArgSchema: json.RawMessage(`{"type":"object","required":["name"]}`), TimeoutSeconds: 10})
	// Shell syntax in the payload stays one literal argument.
	res, err := c.Run(t.Context(), engine.RunSpec{Payload: json.RawMessage(`{"name":"Ada; rm -rf / $(id)"}`), Dir: t.TempDir()})
	require.NoError(t, err)
	require.JSONEq(t, `{"stdout":"hello Ada; rm -rf / $(id)\n"}`, string(res.Result))
	require.Equal(t, 0, *res.ExitCode)
}

func TestCommandStdoutJSONBecomesResult(t *testing.T) {
	t.Parallel()
	c := compile(t, &engine.Definition{Key: "js", Executable: "/bin/echo", Args: []string{`{"n": {{.n}}, "ok": true}`}})
	res, err := c.Run(t.Context(), engine.RunSpec{Payload: json.RawMessage(`{"n":42}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"n":42,"ok":true}`, string(res.Result))
}

func TestCommandPayloadFailingSchemaNamesField(t *testing.T) {
	t.Parallel()
	c := compile(t, &engine.Definition{Key: "typed", Executable: "/bin/true",
		ArgSchema: json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"n":{"type":"integer"}}}`)})
	err := c.CheckPayload(json.RawMessage(`{"n":1}`))
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Equal(t, "payload.name", engine.ErrorField(err))
	err = c.CheckPayload(json.RawMessage(`{"name":"x","n":"seven"}`))
	require.Equal(t, "payload.n", engine.ErrorField(err), engine.ErrorMessage(err))
	require.Contains(t, engine.ErrorMessage(err), "integer")
	require.NoError(t, c.CheckPayload(json.RawMessage(`{"name":"x","n":7}`)))
}

func TestCommandDefinitionValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d     engine.Definition
		field string
	}{
		{engine.Definition{Key: "Bad Key", Executable: "/bin/true"}, "key"},
		{engine.Definition{Key: "rel", Executable: "echo"}, "executable"},
		{engine.Definition{Key: "tmpl", Executable: "/bin/echo", Args: []string{"{{.x"}}, "args[0]"},
		{engine.Definition{Key: "schema", Executable: "/bin/true", ArgSchema: json.RawMessage(`{"type":"nope"}`)}, "argSchema"},
		{engine.Definition{Key: "to", Executable: "/bin/true", TimeoutSeconds: -1}, "timeoutSeconds"},
	} {
		_, err := tc.d.Compile()
		require.Equal(t, tc.field, engine.ErrorField(err), "%+v: %v", tc.d, err)
	}
}

func TestCommandEnvironmentIsAllowlisted(t *testing.T) {
	t.Parallel()
	c := compile(t, &engine.Definition{Key: "env", Executable: "/usr/bin/env", Env: []string{"WANTED"}})
	vars := map[string]string{"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "s3cret", "WANTED": "yes"}
	dir := t.TempDir()
	res, err := c.Run(t.Context(), engine.RunSpec{Dir: dir, Env: []string{"SLUICE_JOB_ID=7"},
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	require.NoError(t, err)
	out := res.StdoutTail
	require.Contains(t, out, "PATH=/usr/bin:/bin\n")
	require.Contains(t, out, "WANTED=yes\n")
	require.Contains(t, out, "SLUICE_JOB_ID=7\n")
	require.NotContains(t, out, "SECRET_TOKEN")
}

// A command that hangs, with a child of its own, is killed at its timeout
// together with the child, and the attempt is a transient failure.
func TestCommandHangingIsKilledWithItsChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	c := compile(t, &engine.Definition{Key: "hang", Executable: "/bin/sh", TimeoutSeconds: 1,
		Args: []string{"-c", `sleep 300 & echo $! > "$1"; echo started; wait`, "sh", "{{.pidFile}}"}})
	payload, _ := json.Marshal(map[string]string{"pidFile": pidFile})
	start := time.Now()
	res, err := c.Run(t.Context(), engine.RunSpec{Payload: payload, Dir: dir})
	require.Error(t, err)
	require.Less(t, time.Since(start), 60*time.Second, "the run returned (it did not wait for the child's 300 s)")
	require.Equal(t, engine.ClassTransient, engine.ClassOf(err))
	require.Contains(t, err.Error(), "timed out")
	require.True(t, res.TimedOut)
	require.Nil(t, res.ExitCode)
	require.Contains(t, res.StdoutTail, "started")
	raw, rerr := os.ReadFile(pidFile)
	require.NoError(t, rerr)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.Positive(t, pid)
	require.Eventually(t, func() bool {
		// Gone, or a zombie waiting for its (also killed) parent's reaper.
		if err := syscall.Kill(pid, 0); err != nil {
			return true
		}
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		f := strings.Fields(string(st))
		return len(f) > 2 && f[2] == "Z"
	}, 5*time.Second, 20*time.Millisecond, "the child sleep %d was killed with its group", pid)
}

// A command that floods stdout is never blocked: it runs to its end, the
// kept tail is bounded and the result says the output was cut.
func TestCommandFloodingStdoutIsBoundedAndNotBlocked(t *testing.T) {
	t.Parallel()
	const n = 20 << 20
	c := compile(t, &engine.Definition{Key: "flood", Executable: "/bin/sh", TimeoutSeconds: 120,
		Args: []string{"-c", `head -c ` + strconv.Itoa(n) + ` /dev/zero | tr '\0' x; echo; echo the-end; echo err-line >&2`}})
	res, err := c.Run(t.Context(), engine.RunSpec{Dir: t.TempDir()})
	require.NoError(t, err)
	require.False(t, res.TimedOut)
	require.Equal(t, int64(n+len("\nthe-end\n")), res.Stdout)
	require.Len(t, res.StdoutTail, engine.CommandTailBytes)
	require.True(t, strings.HasSuffix(res.StdoutTail, "xxx\nthe-end\n"))
	require.Equal(t, "err-line\n", res.StderrTail)
	var out map[string]any
	require.NoError(t, json.Unmarshal(res.Result, &out))
	require.Equal(t, true, out["stdoutTruncated"])
	require.LessOrEqual(t, len(out["stdout"].(string)), engine.CommandTailBytes)
}

func TestCommandExitCodesMapToClasses(t *testing.T) {
	t.Parallel()
	c := compile(t, &engine.Definition{Key: "exit", Executable: "/bin/sh", PermanentExitCodes: []int{3},
		Args: []string{"-c", "echo oops >&2; exit {{.code}}"}})
	_, err := c.Run(t.Context(), engine.RunSpec{Payload: json.RawMessage(`{"code":3}`)})
	require.Equal(t, engine.ClassPermanent, engine.ClassOf(err))
	require.Contains(t, err.Error(), "exit code 3: oops")
	_, err = c.Run(t.Context(), engine.RunSpec{Payload: json.RawMessage(`{"code":1}`)})
	require.Equal(t, engine.ClassTransient, engine.ClassOf(err))
	missing := compile(t, &engine.Definition{Key: "missing", Executable: "/nonexistent/prog"})
	_, err = missing.Run(t.Context(), engine.RunSpec{})
	require.Equal(t, engine.ClassPermanent, engine.ClassOf(err))
}

// Through the runner: the command processor records the exit code and the
// output tails with the attempt; a stage naming an undefined command is
// refused (ERROR, permanent) without running anything.
func TestCommandProcessorInRunner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	_, err := engine.ApplyDefinition(t.Context(), s, &engine.Definition{Key: "fail", Executable: "/bin/sh",
		Args: []string{"-c", "echo out-line; echo err-line >&2; exit 3"}, PermanentExitCodes: []int{3}}, time.Now())
	require.NoError(t, err)
	reg := engine.NewRegistry()
	reg.Register(engine.CommandKind, engine.NewCommandFactory(engine.CommandProcessorConfig{Definitions: s, WorkDir: t.TempDir()}))
	_, err = s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "ghost",
		Stages: []engine.Stage{{Processor: engine.CommandKind, Config: json.RawMessage(`{"definition":"ghost"}`)}}}, Now: time.Now()})
	require.NoError(t, err)
	failJob, err := engine.StartJob(t.Context(), s, nil, engine.JobRequest{Definition: "fail", Now: time.Now()})
	require.NoError(t, err)
	ghostJob, err := engine.StartJob(t.Context(), s, nil, engine.JobRequest{Pipeline: "ghost", Payload: json.RawMessage(`{"a":"1"}`), Now: time.Now()})
	require.NoError(t, err)
	r, err := engine.NewRunner(engine.RunnerConfig{Store: s, Registry: reg, Drain: true})
	require.NoError(t, err)
	_, err = r.Run(t.Context())
	require.NoError(t, err)

	page, err := s.ListItems(t.Context(), &engine.ListItemsParams{JobID: failJob.ID, Limit: 1})
	require.NoError(t, err)
	it := page.Items[0]
	require.Equal(t, engine.ItemError, it.Status)
	require.Equal(t, 1, it.Attempts, "a permanent exit code is not retried")
	at := attempts(t, s, it.ID)
	require.Len(t, at, 1)
	require.Equal(t, engine.ClassPermanent, at[0].ErrorClass)
	var detail struct {
		ExitCode   int    `json:"exitCode"`
		StdoutTail string `json:"stdoutTail"`
		StderrTail string `json:"stderrTail"`
		PID        int    `json:"pid"`
	}
	require.NoError(t, json.Unmarshal(at[0].Detail, &detail), "%s", at[0].Detail)
	require.Equal(t, 3, detail.ExitCode)
	require.Equal(t, "out-line\n", detail.StdoutTail)
	require.Equal(t, "err-line\n", detail.StderrTail)
	require.Positive(t, detail.PID)

	page, err = s.ListItems(t.Context(), &engine.ListItemsParams{JobID: ghostJob.ID, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, engine.ItemError, page.Items[0].Status)
	require.Contains(t, page.Items[0].LastError, `command "ghost" is not defined (refused)`)
}
