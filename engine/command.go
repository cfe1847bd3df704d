package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Output limits of one command run. A program may write any amount: the
// pipes are always drained (the program is never blocked on a full pipe),
// but only this much is kept.
const (
	// CommandTailBytes is how much of the end of stdout and of stderr is
	// stored with the attempt.
	CommandTailBytes = 4 << 10
	// CommandResultBytes is the most stdout that can become a JSON result.
	CommandResultBytes = 1 << 20
)

// RunSpec is one run of a compiled command.
type RunSpec struct {
	Payload json.RawMessage
	// Dir is the working directory (created when missing).
	Dir string
	// Env are extra variables (NAME=value) set for the program, after the
	// allowlisted ones.
	Env []string
	// LookupEnv reads Sluice's own environment (os.LookupEnv by default).
	LookupEnv func(string) (string, bool)
}

// RunResult is what a run produced.
type RunResult struct {
	PID      int   `json:"pid,omitempty"`
	ExitCode *int  `json:"exitCode,omitempty"`
	TimedOut bool  `json:"timedOut,omitempty"`
	Canceled bool  `json:"canceled,omitempty"`
	Stdout   int64 `json:"stdoutBytes"`
	// StdoutTail and StderrTail are the last CommandTailBytes of each.
	StdoutTail string        `json:"stdoutTail,omitempty"`
	StderrTail string        `json:"stderrTail,omitempty"`
	Duration   time.Duration `json:"durationNs"`
	// Result is stdout as a JSON object when it was one, else
	// {"stdout": tail} (with "stdoutTruncated" when it was cut).
	Result json.RawMessage `json:"-"`
}

// Run runs the command once: argv from the payload, a reduced environment,
// its own process group, killed as a group on timeout or when ctx ends. A
// non-nil error is a classified *Failure (see commandFailure) or a payload
// error (permanent).
func (c *Command) Run(ctx context.Context, spec RunSpec) (*RunResult, error) {
	if err := c.CheckPayload(spec.Payload); err != nil {
		return nil, Permanent(err)
	}
	argv, err := c.Argv(spec.Payload)
	if err != nil {
		return nil, Permanent(err)
	}
	if spec.Dir != "" {
		if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
			return nil, Transient(fmt.Errorf("command %s: working directory: %w", c.Def.Key, err))
		}
	}
	lookup := spec.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var env []string
	for _, names := range [][]string{CommandBaseEnv, c.Def.Env} {
		for _, n := range names {
			if v, ok := lookup(n); ok {
				env = append(env, n+"="+v)
			}
		}
	}
	env = append(env, spec.Env...)

	stdout := &tailBuffer{head: CommandResultBytes}
	stderr := &tailBuffer{}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: env, Dir: spec.Dir, Stdout: stdout, Stderr: stderr,
		Stdin: bytes.NewReader(spec.Payload)}
	setProcessGroup(cmd)
	// Once the group is killed, stop waiting for pipes a stray grandchild
	// may still hold.
	cmd.WaitDelay = 2 * time.Second
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, Permanent(fmt.Errorf("command %s: start %s: %w", c.Def.Key, argv[0], err))
	}
	res := &RunResult{PID: cmd.Process.Pid}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(c.Def.Timeout())
	defer timer.Stop()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		res.TimedOut = true
		killGroup(cmd)
		waitErr = <-done
	case <-ctx.Done():
		res.Canceled = true
		killGroup(cmd)
		waitErr = <-done
	}
	// The program may have left children behind in its group after it
	// exited: they go too, so no run outlives its attempt.
	killGroup(cmd)
	res.Duration = time.Since(started)
	res.Stdout = stdout.total
	res.StdoutTail, res.StderrTail = stdout.tail(), stderr.tail()
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		code := cmd.ProcessState.ExitCode()
		res.ExitCode = &code
	}
	res.Result = stdout.result()
	return res, c.failure(res, waitErr)
}

// failure maps how a run ended to an error class: exit 0 is success; a
// timeout, a cancellation and a failing exit code are transient (retried
// up to MaxAttempts) unless the code is one of PermanentExitCodes; a
// program killed by a signal is transient.
func (c *Command) failure(res *RunResult, waitErr error) error {
	detail, _ := json.Marshal(res)
	fail := func(class ErrorClass, format string, args ...any) error {
		msg := fmt.Sprintf("command %s: ", c.Def.Key) + fmt.Sprintf(format, args...)
		if t := lastLine(res.StderrTail); t != "" {
			msg += ": " + t
		}
		return &Failure{Class: class, Detail: detail, Err: errors.New(msg)}
	}
	switch {
	case res.TimedOut:
		return fail(ClassTransient, "timed out after %s (process group killed)", c.Def.Timeout())
	case res.Canceled:
		return fail(ClassTransient, "canceled (process group killed)")
	case res.ExitCode != nil && *res.ExitCode == 0:
		return nil
	case res.ExitCode != nil:
		for _, p := range c.Def.PermanentExitCodes {
			if p == *res.ExitCode {
				return fail(ClassPermanent, "exit code %d", *res.ExitCode)
			}
		}
		return fail(ClassTransient, "exit code %d", *res.ExitCode)
	}
	return fail(ClassTransient, "ended: %v", waitErr)
}

func lastLine(s string) string {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) > 200 {
		b = append(b[:200:200], "…"...)
	}
	return string(b)
}

// tailBuffer keeps the first head bytes written (for the JSON result) and
// the last CommandTailBytes; everything else is counted and dropped, so a
// program that floods its output is never blocked and never fills memory.
type tailBuffer struct {
	mu    sync.Mutex
	head  int
	first []byte
	ring  []byte
	pos   int
	total int64
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	if room := b.head - len(b.first); room > 0 {
		b.first = append(b.first, p[:min(room, len(p))]...)
	}
	if len(p) >= CommandTailBytes {
		b.ring = append(b.ring[:0], p[len(p)-CommandTailBytes:]...)
		b.pos = 0
		return len(p), nil
	}
	for _, c := range p {
		if len(b.ring) < CommandTailBytes {
			b.ring = append(b.ring, c)
			continue
		}
		b.ring[b.pos] = c
		b.pos = (b.pos + 1) % CommandTailBytes
	}
	return len(p), nil
}

// tail returns the last bytes written, in order.
func (b *tailBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ring) < CommandTailBytes {
		return string(b.ring)
	}
	return string(b.ring[b.pos:]) + string(b.ring[:b.pos])
}

// result is stdout as a JSON object when all of it was kept and is one;
// otherwise {"stdout": tail}.
func (b *tailBuffer) result() json.RawMessage {
	if b.total <= int64(len(b.first)) {
		trimmed := bytes.TrimSpace(b.first)
		if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
			return trimmed
		}
	}
	out := map[string]any{"stdout": b.tail()}
	if b.total > int64(CommandTailBytes) {
		out["stdoutTruncated"] = true
		out["stdoutBytes"] = strconv.FormatInt(b.total, 10)
	}
	raw, _ := json.Marshal(out)
	return raw
}
