# Gregor: the two commands a new user needs are `go run ./cmd/gregor` (or
# `make run`) and `make test`. Everything else is here for developers.
GO       ?= go
TARGET   ?= gregor
FUZZTIME ?= 20s
# BOOTSTRAP=host:port selects the cluster for TARGET=external.
# ROUNDS=n sets the benchmark rounds (default 3).

.PHONY: build run test checks unit allocs teeth required flake compat bench bench-cluster bench-replication bench-security bench-metrics bench-share bench-tiered bench-scale bench-scale-cluster bench-connections fuzz lint soak soak-quorum faults faults-short

build:
	$(GO) build -o bin/gregor ./cmd/gregor

run: build
	./bin/gregor

# unit tests (with -race), the fsync teeth check and a short fault
# campaign (faults-short: needs root) on one side, the required
# compatibility scenarios on the other, at the same time: the
# scenarios mostly wait (on the JVM tools, on brokers' timers) and use
# under one of the two cores, so side by side make test takes about as
# long as its longer side instead of the sum. Their lines interleave.
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=line checks required

checks: unit
	@$(MAKE) --no-print-directory teeth
	@$(MAKE) --no-print-directory faults-short

unit: allocs
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

# allocation-count tests skip under -race (the race detector allocates and
# sync.Pool drops items at random), so they run once more without it; by
# convention their names end in DoesNotAllocate or Allocs
allocs:
	$(GO) test -count=1 -run 'DoesNotAllocate|Allocs$$' ./...

# every Sync/SyncDir in storage, the raft log and vfs is disabled in turn;
# some test must fail each time (vfs/teeth), or the target fails
teeth:
	$(GO) run ./vfs/teeth

# exactly the scenarios in integration/REQUIRED, against Gregor
required:
	$(GO) run ./integration/cmd/compat -target gregor -required

# make test N times (default 10), one after the other, each from a fresh
# clone of HEAD; prints each run's result, time and failing tests, and
# fails if any run failed (.ci/flake; logs in .flake/<commit>/)
N ?= 10
flake:
	./.ci/flake $(N)

# the cluster failure tests (integration/quorum: kill -9 of controllers and
# brokers, lost majority, every node in turn) repeated COUNT times (default 10)
COUNT ?= 10
soak-quorum:
	$(GO) test -count=$(COUNT) ./integration/quorum/

# the soak (integration/faults TestSoak; not part of make test): a fresh
# three-node Gregor cluster for SOAK_DURATION (default 2h) under the fault
# suite's workloads without a nemesis: keyed idempotent producers and a
# churning consumer group on a topic whose retention deletes segments all
# along, keyed producers on a compacted topic the cleaner compacts all
# along, transactions (some aborted) and a read_committed reader. Every
# SOAK_INTERVAL (1m) each node's RSS, descriptors, goroutines and log
# bytes and the produce latency percentiles are sampled. At the end the
# fault campaign's checkers judge the history (they excuse what
# retention and compaction may remove, nothing else), and the flatness
# verdict compares the median of the first 10 samples after a 5-minute
# warm-up with the last 10 (RSS, descriptors, goroutines and the log
# bytes of the retained and compacted topics may grow 25% plus a small
# slack, produce p99 100% plus 50 ms). It writes
# bench/soak.svg and the soak section of bench/RESULTS.md, pass or fail
SOAK_DURATION ?= 2h
soak:
	SOAK=1 SOAK_DURATION=$(SOAK_DURATION) SOAK_COMMAND='make soak SOAK_DURATION=$(SOAK_DURATION)' \
	  $(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./integration/faults/

# the fault suite (integration/faults): a recorded workload under each
# nemesis (kill -9 of a leader, a follower, a random node; SIGSTOP of a
# leader; a leader cut off from the other nodes in network namespaces,
# which needs root and installs nftables), Apache's verifiable clients
# under leader kills, and the campaign: FAULTS_SCHEDULES (20) randomized
# schedules drawn from FAULTS_SEED (random unless set; printed, so a run
# replays), each a fresh cluster (FAULTS_LAYOUTS: combined3, combined5,
# split3x3) under one nemesis or a process and a network one together
# (kill -9, the active controller killed during a reassignment, SIGSTOP
# past the session timeouts, an isolated node, a majority/minority split,
# a bridge, one-way loss; beside a network one, a slow network (a narrow,
# lossy link: the kernel here has no netem), a full disk, a failing one or
# a wall clock stepped eight days ahead through Gregor's fault hook),
# running the queue (with group members
# churning), transactions and metadata workloads, then a table of
# operations, acknowledged, lost, duplicated and violations per schedule
# and workload. The checkers look for lost, duplicated or reordered
# records, offsets going back, records the group skipped, aborted or
# partial transactions read with read_committed, committed ones lost,
# acknowledged topics or config changes lost, brokers that disagree and
# metadata images that do not converge to one digest.
# TARGET=gregor-cluster (the default) or kafka-cluster;
# FAULTS_DURATION=60s per test or schedule. faults-short is one 20 s
# schedule on three combined nodes, part of make test, from a fixed seed
# (a campaign's that passed; FAULTS_SEED=n draws another) and its
# nemesis pinned (the environment nemeses, added since, would join it)
# so that make test replays the same schedule every time; beside it, the regression
# test of what that seed found (TestFaultIsolatedLeaderStopsServing: a
# leader cut off from the quorum stops answering for its partitions and
# its groups once it may have been replaced).
faults:
	FAULTS=1 FAULTS_TARGET=$(if $(filter gregor,$(TARGET)),gregor-cluster,$(TARGET)) \
	  $(GO) test -race -count=1 -v -timeout 150m -run '^TestFault' ./integration/faults/

faults-short:
	FAULTS=1 FAULTS_SEED=$(or $(FAULTS_SEED),12698874545172988931) FAULTS_NEMESIS=$(or $(FAULTS_NEMESIS),split-majority) FAULTS_SCHEDULES=1 FAULTS_DURATION=20s FAULTS_LAYOUTS=combined3 \
	  $(GO) test -race -count=1 -v -timeout 15m -run '^(TestFaultCampaign|TestFaultIsolatedLeaderStopsServing)$$' ./integration/faults/

# every compatibility scenario against TARGET=gregor|kafka|external, or a
# cluster: gregor-cluster|kafka-cluster (3 combined nodes),
# gregor-cluster-split|kafka-cluster-split (3 controllers + 3 brokers);
# rewrites that target's column of integration/COMPAT.md (go run ./integration/cmd/compat
# -target T -run a,b -add merges a few scenarios into an existing column)
compat:
	$(GO) run ./integration/cmd/compat -target $(TARGET)

# benchmarks against TARGET=both (gregor, kafka and the null broker, the load
# generators' ceiling, alternated every round) or a comma-separated list of
# gregor, kafka, null; writes bench/RESULTS.md
bench:
	$(GO) run ./bench/cmd/bench -target $(TARGET)

# the cluster benchmark: three combined nodes, gregor then kafka, ROUNDS
# fresh clusters each (start-up, topic visibility, metadata commits/s,
# controller failover after kill -9); rewrites the cluster section of
# bench/RESULTS.md and keeps the rest
bench-cluster:
	$(GO) run ./bench/cmd/clusterbench -rounds $(or $(ROUNDS),3)

# the replication benchmark: three combined nodes, gregor then kafka, ROUNDS
# fresh clusters each; topics of replication factor 3, min.insync.replicas 2:
# produce throughput on 1, 6 and 64 partitions with acks=1 and acks=all, the
# three brokers' CPU per GB produced and a follower's CPU per GB it
# replicated, produce p50/p99/p99.9 at half the acks=all maximum, end-to-end
# latency, kill -9 of a partition leader to the first acknowledged write, the
# killed broker's return to every ISR, and a broker stopped while a 10 GiB
# backlog is written catching up under load (-catchup-bytes; needs ~25 GiB
# of free disk, each round's logs are removed when it ends); rewrites the
# replication section of bench/RESULTS.md and keeps the rest
bench-replication:
	$(GO) run ./bench/cmd/clusterbench -replication -rounds $(or $(ROUNDS),3)

# the security benchmark: one combined node, gregor then kafka, ROUNDS
# rounds of three fresh nodes each (PLAINTEXT, SSL, StandardAuthorizer with
# 1,001 ACLs): produce and consume throughput and latency over PLAINTEXT
# and SSL, and produce throughput and latency with the authorizer on and
# off; rewrites the security section of bench/RESULTS.md and keeps the rest
bench-security:
	$(GO) run ./bench/cmd/securitybench -rounds $(or $(ROUNDS),3)

# what the metrics cost on the produce path: CPU per GB produced with
# /metrics scraped every second against no HTTP listener, ROUNDS rounds of
# two fresh nodes in alternating order; prints medians and their ratio
bench-metrics:
	$(GO) run ./bench/cmd/metricscost -rounds $(or $(ROUNDS),5)

# the share-group benchmark (KIP-932): one fresh node per target and
# round, gregor and kafka alternated, ROUNDS rounds (default 3): share
# consume throughput with kafka-share-consumer-perf-test (1 and 4
# consumers on 1 and 16 partitions), acknowledgement flush latency, and
# how late an expired lock's records reach another member; rewrites the
# share section of bench/RESULTS.md and keeps the rest
bench-share:
	$(GO) run ./bench/cmd/sharebench -rounds $(or $(ROUNDS),3)

# the tiered-storage benchmark (KIP-405, the store in a local directory:
# Kafka's LocalTieredStorage, Gregor's directory backend): one fresh node
# per target and round, gregor and kafka alternated, ROUNDS rounds
# (default 3): how fast rolled segments are copied once 256 MiB are
# produced, a cold read of them from the store against a read of as much
# from a plain topic, and produce p50/p99 at 20 MiB/s on a tiered topic
# being copied against a plain one; rewrites the tiered section of
# bench/RESULTS.md and keeps the rest
bench-tiered:
	$(GO) run ./bench/cmd/tieredbench -rounds $(or $(ROUNDS),3)

# the partition-scale benchmark: one fresh node per target and round,
# gregor and kafka alternated, ROUNDS rounds (default 3), TOPICS x PER_TOPIC
# partitions (default 100 x 100): a CreateTopics burst until every
# partition acknowledges a record, Metadata and DescribeTopicPartitions over
# all of them, memory and descriptors per idle partition, SIGTERM, a clean
# restart and a restart after kill -9; rewrites the scale section of
# bench/RESULTS.md and keeps the rest
bench-scale:
	$(GO) run ./bench/cmd/scalebench -rounds $(or $(ROUNDS),3) -topics $(or $(TOPICS),100) -per-topic $(or $(PER_TOPIC),100)

# the cluster partition-scale benchmark: one fresh three-node combined
# cluster per target and round, gregor and kafka alternated, ROUNDS rounds
# (default 3), TOPICS x PER_TOPIC partitions (default 100 x 100) of
# replication factor 3: a CreateTopics burst until every partition
# acknowledges an acks=all record, Metadata over all of them, the idle
# cluster's CPU (followers fetching idle partitions) and RSS per partition
# replica, and a broker's clean and kill -9 restarts to back in every ISR;
# rewrites the cluster scale section of bench/RESULTS.md and keeps the rest
bench-scale-cluster:
	$(GO) run ./bench/cmd/scalebench -cluster -rounds $(or $(ROUNDS),3) -topics $(or $(TOPICS),100) -per-topic $(or $(PER_TOPIC),100)

# the connections benchmark: one fresh node per target and round, gregor
# and kafka alternated, ROUNDS rounds (default 3): CONNECTIONS (default
# 10,000) connections opened by 64 dialers, each answered ApiVersions;
# memory and descriptors per idle connection; one Metadata on every
# connection at once; then on a second fresh node 1,000 idempotent producers
# (InitProducerId and one produce each: time, memory per producer, the
# producer snapshot bytes written at shutdown) and 10,000 classic group
# members in 1,000 groups (time to every group stable, memory per member,
# node CPU per heartbeat at 3 s intervals); rewrites the connections
# section of bench/RESULTS.md
bench-connections:
	$(GO) run ./bench/cmd/connbench -rounds $(or $(ROUNDS),3) -connections $(or $(CONNECTIONS),10000)

fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...
