package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// Cmd describes one external command a scenario runs. Every command runs in
// its own process group so that a timeout or Ctrl-C kills the JVM, the shell
// and anything they forked, not just the direct child.
type Cmd struct {
	Name  string   // program
	Args  []string // arguments
	Env   []string // extra KEY=VALUE on top of os.Environ()
	Dir   string
	Stdin string
	// Timeout bounds this one command; the scenario's context bounds it too.
	Timeout time.Duration
}

// String renders the command line for logs and reports.
func (c Cmd) String() string {
	var b strings.Builder
	for _, e := range c.Env {
		b.WriteString(e)
		b.WriteByte(' ')
	}
	b.WriteString(shellQuote(c.Name))
	for _, a := range c.Args {
		b.WriteByte(' ')
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Output is what a finished command left behind.
type Output struct {
	Stdout   string
	Stderr   string
	ExitCode int // -1 when killed or never started
	Elapsed  time.Duration
}

// Tail returns the telling part of stderr (else stdout) for error
// messages: the last lines, without Java stack frames and the tools'
// banners, so that the exception itself survives truncation.
func (o Output) Tail() string {
	s := strings.TrimSpace(o.Stderr)
	if s == "" {
		s = strings.TrimSpace(o.Stdout)
	}
	var kept []string
	for _, l := range strings.Split(s, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "at ") || strings.HasPrefix(t, "... ") || strings.HasPrefix(t, "The consumer rebalance protocol (KIP-848)") ||
			strings.HasPrefix(t, "SLF4J:") || strings.HasPrefix(t, "Option --") || strings.HasPrefix(t, "Warning: --") {
			continue
		}
		kept = append(kept, l)
	}
	return lastLines(strings.Join(kept, "\n"), 5)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ExitError reports a command that ran but exited non-zero or was killed.
type ExitError struct {
	Cmd    string // the full command line
	Label  string // what ran, in a few words (program, or Java main class)
	Output Output
	Err    error
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.Label, e.Err, truncate(e.Output.Tail(), 600))
}

// Pinned is c run under `taskset -c cpus` (taskset execs it, so the
// process id is c's own); with no cpus it is c as it is.
func Pinned(cpus string, c Cmd) Cmd {
	if cpus == "" {
		return c
	}
	c.Args = append([]string{"-c", cpus, c.Name}, c.Args...)
	c.Name = "taskset"
	return c
}

// Label names what c runs in a few words: the program's base name, or for
// java the main class (the first argument after the class path that is not
// a flag), which is what a reader of a failure needs.
func (c Cmd) Label() string {
	name := filepath.Base(c.Name)
	if name == "taskset" && len(c.Args) > 2 {
		return Cmd{Name: c.Args[2], Args: c.Args[3:]}.Label()
	}
	if name != "java" {
		return name
	}
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		if a == "-cp" || a == "-classpath" {
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") {
			return a[strings.LastIndex(a, ".")+1:]
		}
	}
	return name
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Run runs c to completion and returns its output. A non-zero exit or a
// timeout is an *ExitError carrying the output.
func Run(ctx context.Context, c Cmd) (Output, error) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	cmd := exec.Command(c.Name, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.SysProcAttr = ChildProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stdout, max: 64 << 20}
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4 << 20}
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Output{ExitCode: -1}, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		killGroup(cmd.Process.Pid, done)
		err = <-done
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	out := Output{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		out.ExitCode = -1
	}
	if err != nil {
		return out, &ExitError{Cmd: c.String(), Label: c.Label(), Output: out, Err: err}
	}
	return out, nil
}

// killGroup sends SIGTERM to the process group, then SIGKILL if it has not
// exited within stopGrace. done receives the result of Wait; killGroup puts
// it back so the caller can read it.
func killGroup(pid int, done chan error) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// limitedBuffer keeps at most max bytes so that a runaway tool cannot eat
// the machine's memory; the rest is dropped.
type limitedBuffer struct {
	mu  sync.Mutex
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

// Proc is a long-running process (a broker, a background consumer) that the
// harness owns until Stop. Its output goes to a log file.
type Proc struct {
	Name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
}

// Start launches c in the background with stdout and stderr appended to
// logPath. c.Timeout is ignored: the owner decides when to Stop.
func Start(c Cmd, logPath string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", c.Name, err)
	}
	fmt.Fprintf(f, "# %s\n# started %s\n", c.String(), time.Now().Format(time.RFC3339))
	cmd := exec.Command(c.Name, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.SysProcAttr = ChildProcAttr()
	cmd.Stdout = f
	cmd.Stderr = f
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", c.Name, err)
	}
	p := &Proc{Name: c.Name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (also its process group id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// LogTail returns the last n lines of the process log.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	return lastLines(strings.TrimSpace(string(b)), n)
}

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs.
// It is safe to call more than once.
func (p *Proc) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); !exited {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	// The group is not signalled once its leader has been reaped: the id
	// may by then belong to someone else's process group.
	p.logFile.Close()
	var exitErr *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &exitErr) {
		return p.waitErr
	}
	return nil
}

// Kill sends SIGKILL to the process group and waits for the process, as
// kill -9 does to a broker in a crash test; Stop still closes the log.
func (p *Proc) Kill() {
	if exited, _ := p.Exited(); !exited {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
}
