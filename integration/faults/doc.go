// Package faults is the fault suite: it proves "nothing acknowledged is
// lost" on a cluster (Gregor, or Apache Kafka 4.3.1 to prove the suite)
// in the way Jepsen does.
//
// A Workload of idempotent acks=all producers and group consumers runs
// against a topic with 6 partitions, replication factor 3 and
// min.insync.replicas=2, and records every operation in a History
// (invoked, then ok, fail or info, with partition, offset and value). A
// TxnWorkload of transactional producers (each transaction a few records
// to distinct partitions of a topic of its own, some aborted on purpose)
// and a read_committed reader records its transactions and reads in the
// same History. A MetaWorkload creates topics and changes their
// retention.ms one request at a time; at the end every broker's own view
// of them (Metadata and DescribeConfigs) and, on Gregor, every node's
// metadata image (offset and digest from /debug/metadata at
// GREGOR_PPROF_ADDR, port DebugPort in its namespace) are recorded too.
// A ShareWorkload (KIP-932) sends to a topic of its own that the members
// of a share group consume, accept and flush, recording each record's
// delivery count and whether its acceptance was confirmed; at the end the
// group's share-partition start offsets are recorded beside the
// partitions' end offsets.
// In the campaign the group's members leave and join all along
// (Workload.Churn). A Nemesis meanwhile injects and heals one kind of
// fault again and again: kill -9 of a partition leader, a follower or any
// node, then a restart on its data; kill -9 of the active controller
// right after a partition reassignment was started; SIGSTOP of a leader
// or any node; and, with
// each node in a network namespace of the suite's own, nftables rules
// that isolate a node (the leader or any), split a minority from the
// majority, make one node a bridge between two halves that do not see
// each other, or drop one node's packets in one direction only
// (Network.Drop); a slow, lossy network for a node (Network.SetSlow); a
// disk that fills up or fails with EIO under a node, through Gregor's
// storage fault hook (environment.go); or a process fault and a network
// one together, or a network one and one of the environment's (Combine). After the faults are healed a final read takes every
// partition from offset 0 to its end (and, once no transaction is open,
// the transactions' topic with read_committed), and Check, CheckTxn,
// CheckMeta and CheckShare hold the history to the queue's and group's,
// the transactions', the metadata's and the share group's invariants (see
// the Kind constants).
//
// The campaign (TestFaultCampaign) is Jepsen's randomized method:
// FAULTS_SCHEDULES schedules, each drawn by NewPlan from FAULTS_SEED and
// its index alone (a layout: combined3, combined5 or split3x3; a nemesis
// or a combination; how long a fault lasts), each on a fresh cluster
// with every node in its own namespace, running the three workloads
// (FAULTS_NEMESIS=a or a+b puts one nemesis in every schedule). The seed
// is printed first and last, with a table of operations, acknowledged,
// lost, duplicated and violations per schedule and workload;
// FAULTS_SEED=<seed> replays the plans, and -run
// 'TestFaultCampaign/s07-' one schedule (the node a picker lands on also
// depends on the cluster's state then, e.g. which node leads a
// partition).
//
// Ownership: a History is shared by every client goroutine and the
// nemesis (its own mutex orders the ops); a Workload's or TxnWorkload's
// producers and consumers each own their franz-go client; a Nemesis (and
// Faults.Rng) is driven by one goroutine (RunNemesis) and healed once
// more by the test's cleanup after that goroutine has returned.
//
// The soak (soak_test.go, TestSoak, only with SOAK=1: `make soak`) runs
// the queue workload on a topic whose retention deletes segments all
// along, CompactWorkload on a compacted topic and the transactions
// workload on a fresh cluster for two hours without a nemesis, samples
// each node's RSS, descriptors and goroutines every minute, and holds
// the history to CheckRetention, CheckCompacted and CheckTxn: the same
// invariants, less only what retention (below the log start observed
// after a read, LogStart ops) and compaction (a record with a later one
// of its key) may remove.
//
// The tests (faults_test.go, campaign_test.go) run only with FAULTS=1:
// `make faults TARGET=gregor-cluster|kafka-cluster`, and one short
// schedule with `make faults-short` (part of make test). TRACK-RECORD.md
// lists what the suite has found.
//
// It may import any of Gregor's packages; it starts the built binary and never
// links the broker in.
package faults
