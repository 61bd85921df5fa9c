package main

// Test hook: storage fault injection in a running node. OFF unless the
// environment variable GREGOR_TEST_FAULTS_FILE is set; never set it in
// production.
//
// Black-box tests need a log dir whose disk fails, or fills, under a
// running binary, and neither can be made without root (a read-only dir
// does not fail descriptors already open; a small tmpfs or a loop device
// needs mount). With GREGOR_TEST_FAULTS_FILE=<file>, the log manager's
// filesystem is wrapped in vfs.FaultFS and <file> is read every 50 ms
// (a missing file means no fault). Each line is
//
//	io <dir>     every operation under <dir> fails with EIO (a failing disk)
//	full <dir>   every write under <dir> fails with ENOSPC (a full disk);
//	             removing the line frees the space
//
// Blank lines and lines starting with # are ignored. Only the log dirs'
// files go through it (not the controller's metadata log), and bytes that
// move through memory maps or sendfile (index entries, fetch responses)
// are not failed. The node logs a warning at start when the hook is on.

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
	"time"

	"github.com/gregorbroker/gregor/vfs"
)

// testFaultsEnv names the fault file of the test hook.
const testFaultsEnv = "GREGOR_TEST_FAULTS_FILE"

// testFaultFS wraps fsys in the test hook's FaultFS when testFaultsEnv is
// set, and polls the fault file until ctx ends; otherwise it returns fsys.
func testFaultFS(ctx context.Context, fsys vfs.FS, log *slog.Logger) vfs.FS {
	name := os.Getenv(testFaultsEnv)
	if name == "" {
		return fsys
	}
	log.Warn("TEST HOOK: storage fault injection is on; never use this in production", "env", testFaultsEnv, "file", name)
	ffs := vfs.NewFaultFS(fsys)
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
				faults, err := parseTestFaults(data)
				if err != nil {
					log.Warn("TEST HOOK: bad fault file", "err", err)
				} else {
					ffs.SetFaults(faults)
					log.Warn("TEST HOOK: storage faults set", "faults", fmt.Sprint(faults))
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ffs
}

func parseTestFaults(data []byte) ([]vfs.Fault, error) {
	var out []vfs.Fault
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, dir, ok := strings.Cut(line, " ")
		dir = strings.TrimSpace(dir)
		if !ok || dir == "" {
			return nil, fmt.Errorf("line %q: want \"io <dir>\" or \"full <dir>\"", line)
		}
		switch kind {
		case "io":
			out = append(out, vfs.Fault{Dir: dir, Kind: vfs.FaultIO})
		case "full":
			out = append(out, vfs.Fault{Dir: dir, Kind: vfs.FaultFull})
		default:
			return nil, fmt.Errorf("line %q: unknown fault %q", line, kind)
		}
	}
	return slices.Clip(out), sc.Err()
}
