package devenv

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is one of the project's binaries running against the local
// cluster, with its output in a log file.
type Process struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the process; it keeps running until Stop or Kill.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a Ctrl-C meant for `make run` reaches the
	// children only through Stop, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// Kill ends the process at once with SIGKILL, like a crash.
func (p *Process) Kill() { p.signal(syscall.SIGKILL, 0) }

// Stop asks the process to exit (SIGTERM) and kills it after a grace period.
func (p *Process) Stop() { p.signal(syscall.SIGTERM, 10*time.Second) }

func (p *Process) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
