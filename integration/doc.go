// Package integration is Gregor's black-box compatibility harness: the
// built binary (or Apache Kafka 4.3.1, or any external cluster) against the
// stock Kafka tools, Apache's verifiers, franz-go's kgo suite and other
// real clients. `go run ./integration/cmd/compat` drives it; see README.
//
// Shape:
//
//   - Target (target.go) starts and stops one cluster: gregor (./cmd/gregor
//     with overrides), kafka (kafka.Kafka from Maven jars, formatted with
//     StorageTool --standalone) or external (BOOTSTRAP=host:port). Every
//     node the harness starts has a loopback address of its own
//     (loopback.go: 127.100.X.Y, claimed through a lock file every process
//     shares, kept across restarts) with fixed ports by role, so no two
//     nodes of any tests can want the same address; data dirs are fresh;
//     ready = ApiVersions answers.
//     The cluster targets (kafka-cluster, gregor-cluster, and -split for
//     the 3 controllers + 3 brokers layout) run a Cluster (cluster.go):
//     one properties file, one data dir and one process per node, the
//     same files for both implementations, ready once every broker
//     answers ApiVersions and Metadata lists all of them. Scenarios learn
//     the brokers and voters to expect from Target.Topology.
//   - Tools (deps.go) fetches everything on first use into <repo>/.cache.
//   - Scenario (scenario.go) is one named check with a timeout; Runner runs
//     a list of them in order against one Target and restarts the target
//     if a scenario kills it. Scenarios live in scenarios_*.go, one file
//     per family (cli, verify, kgo, client, lifecycle, streams, tls); streams.go
//     runs Kafka Streams' WordCountDemo for the streams family and for
//     the kill -9 test in integration/streams.
//   - Secured nodes (singlenode.go, pki.go): StartNode, Env.StartNode and,
//     for Go tests, node.StartSingle start a fresh single combined node of
//     either flavor with extra listeners, any properties (ssl.*, sasl.*,
//     authorizer.*) and format flags, and return each listener's address
//     by name and a Stop that kills it and removes its data; a node a
//     scenario starts is stopped when the scenario ends. NewPKI is a test
//     CA issuing server and client certificates as PEM files Kafka reads
//     (ClientSSL and ListenerSSL give the matching properties), and
//     WriteClientProperties writes a Java tool's --command-config. The
//     tls family of scenarios (scenarios_tls.go) is built on them.
//   - report.go merges one run's column into COMPAT.md.
//
// Processes and goroutines: every external command runs in its own
// process group (proc.go) and is killed as a group on timeout or Ctrl-C;
// the long-lived goroutines are the per-process waiters in proc.go, each
// owning its exec.Cmd, and they publish the exit status by closing a
// channel. A Cluster adds short-lived ones that only read those channels:
// watchers that end with their node's process (anyExited) and one per node
// while Stop waits for the nodes together.
// Scenarios run one at a time on the caller's goroutine, so Runner and Env
// need no locks; Tools is the one shared object and guards its memo with a
// single mutex (the only lock in the package).
//
// It may import any of Gregor's packages; nothing but its own tests and bench
// import it.
package integration
