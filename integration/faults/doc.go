// Package faults is the fault suite: it proves "nothing acknowledged is
// lost" on a three-node cluster (Gregor, or Apache Kafka 4.3.1 to prove
// the suite) in the way Jepsen does.
//
// A Workload of idempotent acks=all producers and group consumers runs
// against a topic with 6 partitions, replication factor 3 and
// min.insync.replicas=2, and records every operation in a History
// (invoked, then ok, fail or info, with partition, offset and value). A
// Nemesis meanwhile injects and heals one kind of fault again and again
// (kill -9 of a partition leader, a follower or any node, then a restart
// on its data; SIGSTOP of a leader; a leader cut off from the other nodes
// by nftables rules in network namespaces of the suite's own). After the
// faults are healed a final read takes every partition from offset 0 to
// its end, and Check holds the history to the queue invariants (see the
// Kind constants).
//
// Ownership: a History is shared by every client goroutine and the
// nemesis (its own mutex orders the ops); a Workload's producers and
// consumers each own their franz-go client; a Nemesis is driven by one
// goroutine (RunNemesis) and healed once more by the test's cleanup after
// that goroutine has returned.
//
// The tests (faults_test.go) run only with FAULTS=1: `make faults
// TARGET=gregor-cluster|kafka-cluster`. TRACK-RECORD.md lists what the
// suite has found.
package faults
