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
//	hold tiered-copy
//	             every put to the remote store returns only once the line
//	             is gone (the object is stored first): a copy to tiered
//	             storage is held with objects in the store and no
//	             COPY_SEGMENT_FINISHED, for a kill in the middle of a copy
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
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/tiered"
	"github.com/gregorbroker/gregor/vfs"
)

// testFaultsEnv names the fault file of the test hook.
const testFaultsEnv = "GREGOR_TEST_FAULTS_FILE"

// testHooks is what the test hook gives the log manager: its filesystem
// and its wall clock; and tiered storage its store.
type testHooks struct {
	fs        vfs.FS
	now       func() time.Time
	wrapStore func(tiered.Store) tiered.Store
}

// testFaults is the fault file's content.
type testFaults struct {
	storage        []vfs.Fault
	clock          time.Duration
	holdTieredCopy bool
}

// startTestHooks wraps fsys in the test hook's FaultFS and offsets the
// clock when testFaultsEnv is set, and polls the fault file until ctx
// ends; otherwise it returns fsys and time.Now.
func startTestHooks(ctx context.Context, fsys vfs.FS, log *slog.Logger) testHooks {
	name := os.Getenv(testFaultsEnv)
	if name == "" {
		return testHooks{fs: fsys, now: time.Now, wrapStore: func(s tiered.Store) tiered.Store { return s }}
	}
	log.Warn("TEST HOOK: storage and clock fault injection is on; never use this in production", "env", testFaultsEnv, "file", name)
	ffs := vfs.NewFaultFS(fsys)
	var offset atomic.Int64
	var hold atomic.Bool
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
				f, err := parseTestFaults(data)
				if err != nil {
					log.Warn("TEST HOOK: bad fault file", "err", err)
				} else {
					ffs.SetFaults(f.storage)
					offset.Store(int64(f.clock))
					hold.Store(f.holdTieredCopy)
					log.Warn("TEST HOOK: storage faults set", "faults", fmt.Sprint(f.storage), "clock_offset", f.clock, "hold_tiered_copy", f.holdTieredCopy)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return testHooks{
		fs:  ffs,
		now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
		wrapStore: func(s tiered.Store) tiered.Store {
			held := heldStore{Store: s, held: hold.Load}
			if t, ok := s.(tiered.FileTidier); ok {
				return heldFileStore{heldStore: held, FileTidier: t}
			}
			return held
		},
	}
}

// heldFileStore is a heldStore of a store kept in files.
type heldFileStore struct {
	heldStore
	tiered.FileTidier
}

// heldStore is a store whose puts wait, once stored, while held says so.
type heldStore struct {
	tiered.Store
	held func() bool
}

func (s heldStore) Put(ctx context.Context, key string, body io.ReaderAt, size int64) error {
	if err := s.Store.Put(ctx, key, body, size); err != nil {
		return err
	}
	for s.held() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func parseTestFaults(data []byte) (testFaults, error) {
	var f testFaults
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, arg, ok := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		if !ok || arg == "" {
			return testFaults{}, fmt.Errorf("line %q: want \"io <dir>\", \"full <dir>\", \"clock <duration>\" or \"hold tiered-copy\"", line)
		}
		switch kind {
		case "io":
			f.storage = append(f.storage, vfs.Fault{Dir: arg, Kind: vfs.FaultIO})
		case "full":
			f.storage = append(f.storage, vfs.Fault{Dir: arg, Kind: vfs.FaultFull})
		case "clock":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return testFaults{}, fmt.Errorf("line %q: %w", line, err)
			}
			f.clock = d
		case "hold":
			if arg != "tiered-copy" {
				return testFaults{}, fmt.Errorf("line %q: only \"hold tiered-copy\" is known", line)
			}
			f.holdTieredCopy = true
		default:
			return testFaults{}, fmt.Errorf("line %q: unknown fault %q", line, kind)
		}
	}
	f.storage = slices.Clip(f.storage)
	return f, sc.Err()
}
