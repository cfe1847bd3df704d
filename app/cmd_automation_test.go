package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app"
)

// The minimal definition, run once by hand, once per row of a
// file, and by an event trigger; jobs show where they came from.
func TestCLIDefinitionsTriggersWorkers(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	def := c.file("hello.json", `{"key":"hello","executable":"/bin/echo","args":["hello","{{.name}}"],"argSchema":{"type":"object","required":["name"]},"timeoutSeconds":10}`)
	require.Contains(t, c.ok("definition", "apply", def), "definition hello: version 1 (pipeline command.hello)")
	var defs struct {
		Definitions []struct {
			Key        string   `json:"key"`
			Executable string   `json:"executable"`
			Args       []string `json:"args"`
		} `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("definitions", "--json")), &defs))
	require.Len(t, defs.Definitions, 1)
	require.Equal(t, []string{"hello", "{{.name}}"}, defs.Definitions[0].Args)

	code, _, errs := c.run("definition", "run", "hello", "--payload", `{"nom":"x"}`)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "payload.name")
	code, _, errs = c.run("definition", "run", "rm-rf", "--payload", `{}`)
	require.Equal(t, 1, code)
	require.Contains(t, errs, `command "rm-rf" is not defined: refused`)

	require.Contains(t, c.ok("trigger", "add", "after-run", "--event", "job.finished", "--definition", "hello",
		"--payload", `{"name":"after {{.event.jobId}}"}`), "trigger after-run added")
	require.Contains(t, c.ok("trigger", "add", "nightly", "--cron", "30 2 * * *", "--tz", "America/New_York",
		"--definition", "hello", "--payload", `{"name":"{{.fire.date}}"}`, "--dedupe-window", "10m"), "next fire")
	code, _, errs = c.run("trigger", "add", "bad", "--cron", "30 2 * * *", "--tz", "Nowhere/Land", "--definition", "hello")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "tz:")
	code, _, _ = c.run("trigger", "add", "bad", "--definition", "hello")
	require.Equal(t, 2, code, "neither --cron nor --event is a usage error")

	var trs struct {
		Triggers []struct {
			Name          string `json:"name"`
			Kind          string `json:"kind"`
			NextFireLocal string `json:"nextFireLocal"`
		} `json:"triggers"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("triggers", "--json")), &trs))
	require.Len(t, trs.Triggers, 2)
	require.Equal(t, "event", trs.Triggers[0].Kind)
	require.Regexp(t, `02:30:00 E[SD]T$`, trs.Triggers[1].NextFireLocal)

	c.ok("definition", "run", "hello", "--payload", `{"name":"Ada"}`)
	rows := c.file("names.csv", "name\nBo\nCy\n")
	c.ok("ingest", rows, "--pipeline", "command.hello")
	c.ok("worker", "--drain")

	var jobs struct {
		Jobs []struct {
			ID        int64  `json:"id"`
			Pipeline  string `json:"pipeline"`
			Source    string `json:"source"`
			SourceRef string `json:"sourceRef"`
			State     string `json:"state"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("jobs", "--json")), &jobs))
	require.Len(t, jobs.Jobs, 2, "a drain runs no triggers")
	for _, j := range jobs.Jobs {
		require.Equal(t, "DONE", j.State)
		require.Equal(t, "command.hello", j.Pipeline)
	}
	require.Equal(t, "manual", jobs.Jobs[1].Source)
	var items struct {
		Items []struct {
			Result map[string]string `json:"result"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", "1", "--json")), &items))
	require.Equal(t, "hello Ada\n", items.Items[0].Result["stdout"])
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", "2", "--json")), &items))
	require.Len(t, items.Items, 2, "one run per row")
	require.ElementsMatch(t, []string{"hello Bo\n", "hello Cy\n"},
		[]string{items.Items[0].Result["stdout"], items.Items[1].Result["stdout"]})

	require.Contains(t, c.ok("trigger", "disable", "nightly"), "disabled")
	require.Regexp(t, `nightly .* no\n`, c.ok("triggers"), "listed as not enabled")
	require.Contains(t, c.ok("trigger", "enable", "nightly"), "next fire")
	require.Regexp(t, `next fire \d{4}-\d\d-\d\d 04:15:00 UTC`, c.ok("trigger", "set", "nightly", "--cron", "15 4 * * *", "--tz", "UTC"))
	code, _, errs = c.run("trigger", "set", "nightly", "--missed", "sometimes")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "missed")
	code, _, errs = c.run("trigger", "set", "nightly")
	require.NotZero(t, code)
	require.Contains(t, errs, "at least one")
	require.Contains(t, c.ok("trigger", "rm", "nightly"), "removed")
	code, _, _ = c.run("trigger", "rm", "nightly")
	require.Equal(t, 1, code)
	var ws struct {
		Workers []any `json:"workers"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("workers", "--json")), &ws))
	require.Empty(t, ws.Workers, "no worker runs now; a drain writes no heartbeat")
}

// A running `sluice worker` beats (sluice workers) and runs event
// triggers: a file dropped in a watched folder becomes a job, whose
// source.file.ingested event starts the command, whose job.finished event
// starts another.
func TestWorkerRunsEventTriggers(t *testing.T) {
	c := newCLI(t)
	inbox := filepath.Join(t.TempDir(), "inbox")
	require.NoError(t, os.Mkdir(inbox, 0o755))
	c.ok("source", "add", "folder", "inbox", "--path", inbox, "--pipeline", "noop", "--min-age", "50ms", "--after", "delete")
	def := c.file("hello.json", `{"key":"hello","executable":"/bin/echo","args":["hello","{{.name}}"],"argSchema":{"type":"object","required":["name"]}}`)
	c.ok("definition", "apply", def)
	c.ok("trigger", "add", "on-file", "--event", "source.file.ingested", "--definition", "hello", "--payload", `{"name":"{{.event.key}}"}`)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- app.Main(ctx, []string{"--data", c.data, "--log-level", "error", "worker"}, &out, &errb)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	var ws struct {
		Workers []struct {
			ID    string `json:"id"`
			Stale bool   `json:"stale"`
		} `json:"workers"`
	}
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(c.ok("workers", "--json")), &ws))
		return len(ws.Workers) == 1
	}, 60*time.Second, 50*time.Millisecond, "the worker beats")
	require.False(t, ws.Workers[0].Stale)
	require.Regexp(t, `^[^:]+:\d+:[0-9a-f]{8}$`, ws.Workers[0].ID, "host:pid:boot")

	require.NoError(t, os.WriteFile(filepath.Join(inbox, "names.csv"), []byte("sku\nA1\n"), 0o644))
	type job struct {
		ID        int64  `json:"id"`
		Source    string `json:"source"`
		SourceRef string `json:"sourceRef"`
		State     string `json:"state"`
		Pipeline  string `json:"pipeline"`
	}
	var jobs struct {
		Jobs []job `json:"jobs"`
	}
	require.Eventually(t, func() bool {
		require.NoError(t, json.Unmarshal([]byte(c.ok("jobs", "--json")), &jobs))
		return len(jobs.Jobs) == 2 && jobs.Jobs[0].State == "DONE"
	}, 60*time.Second, 50*time.Millisecond, "the file's job and the command it triggered ran")
	cmdJob := jobs.Jobs[0]
	require.Equal(t, "event", cmdJob.Source)
	require.Equal(t, "command.hello", cmdJob.Pipeline)
	require.Contains(t, cmdJob.SourceRef, "trigger:on-file source.file.ingested source-object:")
	var items struct {
		Items []struct {
			Result map[string]string `json:"result"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", strconv.FormatInt(cmdJob.ID, 10), "--json")), &items))
	require.Equal(t, "hello names.csv\n", items.Items[0].Result["stdout"])

	cancel()
	require.Equal(t, 0, <-done, errb.String())
	stopped = true
	require.NoError(t, json.Unmarshal([]byte(c.ok("workers", "--json")), &ws))
	require.Empty(t, ws.Workers, "a clean stop removes the heartbeat row")
}
