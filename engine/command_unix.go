//go:build unix

package engine

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the program as the leader of its own process
// group, so that it and every child it starts can be killed together.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills the program's whole process group (a no-op once the
// group is empty).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
