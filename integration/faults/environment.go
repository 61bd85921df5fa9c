package faults

// The environment's nemeses: what a node's machine does to it rather than
// what happens to its process or its links. A slow network (every packet
// the node sends, to the other nodes and to clients, goes through a
// narrow link that queues it, and some are lost: Network.SetSlow), and a
// disk that fills up or fails, through Gregor's storage fault hook (GREGOR_TEST_FAULTS_FILE,
// cmd/gregor/testfaults.go), which StartCluster points at FaultFile:
//
//   - full: every write to the node's log dir fails with ENOSPC; Gregor
//     refuses appends with KAFKA_STORAGE_ERROR and keeps serving reads, and
//     takes appends again once the space is freed (the heal).
//   - io: every operation on the log dir fails with EIO; the dir goes
//     offline and, as it is the node's only one, the node stops (as Kafka
//     halts a broker whose last log dir failed). The heal frees the disk
//     and starts the node again on its data (killing it first if it has
//     not noticed yet).
//
// The disk nemeses need Gregor's hook: on Apache Kafka they refuse to
// inject.

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// setDiskFault writes node id's storage fault file: kind "full" or "io"
// on its log dir, or "" for none.
func (f *Faults) setDiskFault(id int, kind string) error {
	if f.Cluster.Flavor() != "gregor" {
		return fmt.Errorf("the disk nemeses need Gregor's storage fault hook (%s); %s has none", testFaultsEnv, f.Cluster.Describe)
	}
	n := f.Cluster.Node(id)
	if n == nil {
		return fmt.Errorf("no node %d", id)
	}
	content := ""
	if kind != "" {
		content = kind + " " + n.LogDir + "\n"
	}
	file := FaultFile(f.Cluster.Dir, id)
	if err := os.WriteFile(file+".tmp", []byte(content), 0o644); err != nil {
		return err
	}
	// Renamed into place, so the node never reads half a file (it
	// reads it every 50 ms).
	return os.Rename(file+".tmp", file)
}
