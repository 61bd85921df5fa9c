package main

// Test hook: storage and clock fault injection in a running node. OFF
// unless the environment variable GREGOR_TEST_FAULTS_FILE is set; never
// set it in production.
//
// Black-box tests need a log dir whose disk fails, or fills, under a
// running binary, and neither can be made without root (a read-only dir
// does not fail descriptors already open; a small tmpfs or a loop device
// needs mount); and a node whose wall clock steps, which cannot be made
// for one process alone (time namespaces move only the monotonic clocks).
// With GREGOR_TEST_FAULTS_FILE=<file>, the log manager's filesystem is
// wrapped in vfs.FaultFS, its wall clock is offset, and <file> is read
// every 50 ms (a missing file means no fault). Each line is
//
//	io <dir>     every operation under <dir> fails with EIO (a failing disk)
//	full <dir>   every write under <dir> fails with ENOSPC (a full disk);
//	             removing the line frees the space
//	clock <d>    the log manager's wall clock reads <d> (a Go duration,
//	             e.g. 192h or -30m) away from the real one: a step of the
//	             node's clock; removing the line steps it back
//
// Blank lines and lines starting with # are ignored. Only the log dirs'
// files and the log manager's clock go through it (not the controller's
// metadata log, and no other component's clock), and bytes that move
// through memory maps or sendfile (index entries, fetch responses) are
// not failed. The node logs a warning at start when the hook is on.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// testFaultsEnv names the fault file of the test hook.
const testFaultsEnv = "GREGOR_TEST_FAULTS_FILE"

// testHooks is what the test hook gives the log manager: its filesystem
// and its wall clock.
type testHooks struct {
	fs  vfs.FS
	now func() time.Time
}

// startTestHooks wraps fsys in the test hook's FaultFS and offsets the
// clock when testFaultsEnv is set, and polls the fault file until ctx
// ends; otherwise it returns fsys and time.Now.
func startTestHooks(ctx context.Context, fsys vfs.FS, log *slog.Logger) testHooks {
	name := os.Getenv(testFaultsEnv)
	if name == "" {
		return testHooks{fs: fsys, now: time.Now}
	}
	log.Warn("TEST HOOK: storage and clock fault injection is on; never use this in production", "env", testFaultsEnv, "file", name)
	ffs := vfs.NewFaultFS(fsys)
	var offset atomic.Int64
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var last []byte
		for {
			data, err := os.ReadFile(name)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				log.Warn("TEST HOOK: reading the fault file", "err", err)
			}
			if !bytes.Equal(data, last) {
				last = data
				faults, clock, err := parseTestFaults(data)
				if err != nil {
					log.Warn("TEST HOOK: bad fault file", "err", err)
				} else {
					ffs.SetFaults(faults)
					offset.Store(int64(clock))
					log.Warn("TEST HOOK: storage faults set", "faults", fmt.Sprint(faults), "clock_offset", clock)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return testHooks{fs: ffs, now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }}
}

func parseTestFaults(data []byte) ([]vfs.Fault, time.Duration, error) {
	var out []vfs.Fault
	var clock time.Duration
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, arg, ok := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		if !ok || arg == "" {
			return nil, 0, fmt.Errorf("line %q: want \"io <dir>\", \"full <dir>\" or \"clock <duration>\"", line)
		}
		switch kind {
		case "io":
			out = append(out, vfs.Fault{Dir: arg, Kind: vfs.FaultIO})
		case "full":
			out = append(out, vfs.Fault{Dir: arg, Kind: vfs.FaultFull})
		case "clock":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return nil, 0, fmt.Errorf("line %q: %w", line, err)
			}
			clock = d
		default:
			return nil, 0, fmt.Errorf("line %q: unknown fault %q", line, kind)
		}
	}
	return slices.Clip(out), clock, sc.Err()
}
