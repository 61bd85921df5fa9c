package faults

// The environment's nemeses: what a node's machine does to it rather than
// what happens to its process or its links. A slow network (every packet
// the node sends, to the other nodes and to clients, goes through a
// narrow link that queues it, and some are lost: Network.SetSlow), and a
// disk that fills up or fails, through Gregor's storage fault hook (GREGOR_TEST_FAULTS_FILE,
// cmd/gregor/testfaults.go), which StartCluster points at FaultFile, and
// a wall clock that steps eight days ahead (the same hook, on the log
// manager's clock):
//
//   - full: every write to the node's log dir fails with ENOSPC; Gregor
//     refuses appends with KAFKA_STORAGE_ERROR and keeps serving reads, and
//     takes appends again once the space is freed (the heal).
//   - io: every operation on the log dir fails with EIO; the dir goes
//     offline and, as it is the node's only one, the node stops (as Kafka
//     halts a broker whose last log dir failed). The heal frees the disk
//     and starts the node again on its data (killing it first if it has
//     not noticed yet).
//   - clock: the node's clock reads eight days ahead, past retention.ms and
//     producer.id.expiration.ms (checked every second here:
//     clusterProperties); Gregor decides what is old enough to delete by a
//     clock such a step cannot push ahead (cmd/gregor/clock.go), so no
//     segment and no producer goes. The heal steps it back.
//
// The disk and clock nemeses need Gregor's hook: on Apache Kafka they
// refuse to inject.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Slow makes the network of the node pick chooses slow (Network.SetSlow);
// Heal makes it whole again. It needs the cluster on a Network.
func Slow(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: "slowed the network of (" + slowShape + ")",
		inject: func(ctx context.Context, id int) error {
			if f.Net == nil {
				return errors.New("a slow network needs the cluster in network namespaces")
			}
			return f.Net.SetSlow(ctx, id, true)
		},
		heal: func(ctx context.Context, id int) error { return f.Net.SetSlow(ctx, id, false) }}
}

// DiskFull fills the log dir of the node pick chooses; Heal frees it.
func DiskFull(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: "filled the disk of",
		inject: func(_ context.Context, id int) error { return f.setDiskFault(id, "full") },
		heal:   func(_ context.Context, id int) error { return f.setDiskFault(id, "") }}
}

// DiskFail makes the log dir of the node pick chooses fail every
// operation with EIO; Heal frees the disk and restarts the node.
func DiskFail(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: "failed the disk (EIO) of",
		inject: func(_ context.Context, id int) error { return f.setDiskFault(id, "io") },
		heal: func(ctx context.Context, id int) error {
			if err := f.setDiskFault(id, ""); err != nil {
				return err
			}
			if f.Cluster.Node(id).Pid() != 0 {
				// It has not touched its disk since, or is still
				// stopping: a failed disk is a crash either way.
				if err := f.Cluster.Kill(id); err != nil {
					return err
				}
			}
			return f.Cluster.Restart(ctx, id)
		}}
}

// nodeFaults is what node id's fault file says: a disk fault ("full",
// "io" or "") and a clock offset.
type nodeFaults struct {
	disk  string
	clock time.Duration
}

// setDiskFault sets node id's disk fault: kind "full" or "io" on its log
// dir, or "" for none.
func (f *Faults) setDiskFault(id int, kind string) error {
	return f.setNodeFaults(id, func(nf *nodeFaults) { nf.disk = kind })
}

// setClockOffset steps node id's storage clock to d from the real one (0:
// back to it).
func (f *Faults) setClockOffset(id int, d time.Duration) error {
	return f.setNodeFaults(id, func(nf *nodeFaults) { nf.clock = d })
}

// setNodeFaults changes node id's faults and writes its fault file.
func (f *Faults) setNodeFaults(id int, change func(*nodeFaults)) error {
	if f.Cluster.Flavor() != "gregor" {
		return fmt.Errorf("the disk and clock nemeses need Gregor's fault hook (%s); %s has none", testFaultsEnv, f.Cluster.Describe)
	}
	n := f.Cluster.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	f.hookMu.Lock()
	defer f.hookMu.Unlock()
	if f.hooks == nil {
		f.hooks = map[int]nodeFaults{}
	}
	nf := f.hooks[id]
	change(&nf)
	f.hooks[id] = nf
	var content strings.Builder
	if nf.disk != "" {
		fmt.Fprintf(&content, "%s %s\n", nf.disk, n.LogDir)
	}
	if nf.clock != 0 {
		fmt.Fprintf(&content, "clock %s\n", nf.clock)
	}
	file := FaultFile(f.Cluster.Dir, id)
	if err := os.WriteFile(file+".tmp", []byte(content.String()), 0o644); err != nil {
		return err
	}
	// Renamed into place, so the node never reads half a file (it
	// reads it every 50 ms).
	return os.Rename(file+".tmp", file)
}

// clockStep is how far the clock nemesis steps a node's clock: past the
// topics' retention.ms (7 days, Kafka's default) and
// producer.id.expiration.ms (1 day), so that a node that believed its
// clock would delete every segment and forget every producer.
const clockStep = 8 * 24 * time.Hour

// ClockStep steps the wall clock of the node pick chooses eight days
// ahead (Gregor's hook: its log manager's clock); Heal steps it back.
func ClockStep(f *Faults, name string, pick picker) Nemesis {
	return &nodeFault{f: f, name: name, pick: pick, verb: fmt.Sprintf("stepped the clock %s ahead on", clockStep),
		inject: func(_ context.Context, id int) error { return f.setClockOffset(id, clockStep) },
		heal:   func(_ context.Context, id int) error { return f.setClockOffset(id, 0) }}
}
