package bench

import (
	"bytes"
	"fmt"
	"strings"
)

const (
	securityBegin = "<!-- security bench: begin (written by make bench-security; make bench, bench-cluster and bench-replication keep it) -->"
	securityEnd   = "<!-- security bench: end -->"
)

// SecuritySection is the part `make bench-security` writes.
func SecuritySection() Section { return Section{securityBegin, securityEnd} }

// noAuthorizerNote is the cell of an authorization figure for a target
// whose broker had no authorizer; "" for every other cell.
func noAuthorizerNote(run *SecurityRun, target, figure string) string {
	if run.NoAuthorizer[target] == "" {
		return ""
	}
	if strings.Contains(figure, authLabel(run.Config.ACLs)) || strings.HasPrefix(figure, "authorizer on / off") {
		return "not run: no authorizer at this commit"
	}
	return ""
}

// RenderSecurity writes the security section of RESULTS.md for run,
// between its markers. command is the command line that produced it.
func RenderSecurity(run *SecurityRun, m Machine, commit, command string) []byte {
	var b bytes.Buffer
	cfg := run.Config
	b.WriteString(securityBegin + "\n\n")
	b.WriteString("## Security: TLS and authorization on one node\n\n")
	fmt.Fprintf(&b, "Written by `make bench-security` (`%s`). Do not edit by hand.\n\n", command)
	if cfg.Rounds < 3 {
		fmt.Fprintf(&b, "**A trial, not the full benchmark:** %d round(s), %s records per throughput workload, taken at the load average below; not numbers to quote.\n\n", cfg.Rounds, thousands(cfg.Records))
	}
	fmt.Fprintf(&b, "- date: %s, took %s\n", run.Started.UTC().Format("2006-01-02 15:04 UTC"), run.Elapsed.Round(1e9))
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	fmt.Fprintf(&b, "- machine: %d cores (%s), %.1f GiB memory, Linux %s; load average %s at the start, %s at the end (the machine is shared with other work)\n",
		m.Cores, m.CPUModel, m.MemGiB, m.Kernel, run.LoadAvg[0], run.LoadAvg[1])
	if len(run.RoundLoads) > 0 {
		fmt.Fprintf(&b, "- load average as each target's round started: %s\n", strings.Join(run.RoundLoads, "; "))
	}
	fmt.Fprintf(&b, "- targets, alternated in this order every round: %s; %d round(s). In each, a target runs three fresh single combined nodes one after the other (new directory, new ports, formatted with the target's own storage tool, `integration.StartNode`): PLAINTEXT, SSL and authorizer, in that order on odd rounds and the reverse on even ones\n", strings.Join(cfg.Targets, ", "), cfg.Rounds)
	for _, t := range cfg.Targets {
		if d := run.Describe[t]; d != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t, d)
		}
	}
	if cfg.BrokerCPU != "" {
		fmt.Fprintf(&b, "- pinning: the node runs under `taskset -c %s`, every load generator under `taskset -c %s`; topic and ACL creation (this process) is unpinned and done before the workloads\n", cfg.BrokerCPU, cfg.LoadCPU)
	} else {
		b.WriteString("- pinning: none (taskset not available)\n")
	}
	fmt.Fprintf(&b, "- listeners, the same on every node: PLAINTEXT and SSL for the load; INTERNAL (`inter.broker.listener.name`) and CONTROLLER over SSL with `ssl.client.auth=required`, so that the node's own principal is its certificate's subject, `%s`. One test CA (ECDSA P-256) issues one server certificate (ECDSA P-256, for 127.0.0.1, localhost and every address of the harness's loopback pool, 127.100.0.0/22), served from PEM files (`ssl.keystore.type=PEM`, `ssl.truststore.type=PEM`, under each listener's `listener.name.<l>.` prefix); the SSL listener asks for no client certificate, and the load checks the server's against the CA and the address\n", brokerPrincipal)
	for _, t := range cfg.Targets {
		if v := run.TLS[t]; v != "" {
			fmt.Fprintf(&b, "- %s's SSL listener negotiated %s with a Go client (crypto/tls, as the load generator)\n", t, v)
		}
	}
	fmt.Fprintf(&b, "- payload: %s\n", run.Payload)
	fmt.Fprintf(&b, "- produce throughput: `loadgen produce` (franz-go: idempotent, acks=all, lz4, linger 5 ms, batches up to 1 MiB, 100,000 records buffered) writes %s records to a %d-partition topic created beforehand; MB/s is MiB of payload per second, from the first record produced (after one warm-up record) to the last acknowledged\n", thousands(cfg.Records), secPartitions)
	fmt.Fprintf(&b, "- produce latency: right after, `loadgen produce-latency` writes %d records/s (linger 0, open loop: records go out on schedule whatever the acknowledgements do) for %s to the same topic; latency is a record's Produce call to its acknowledgement\n", cfg.Rate, cfg.LatencyTime)
	fmt.Fprintf(&b, "- consume throughput (PLAINTEXT and SSL nodes): `loadgen consume` reads the first %s records of that topic from the start, without a group\n", thousands(cfg.Records))
	fmt.Fprintf(&b, "- end-to-end latency (PLAINTEXT and SSL nodes): `loadgen e2e` produces %d records/s (linger 0) for %s to a fresh %d-partition topic, each stamped with its send time, and a consumer in the same process (no group, from the log end) tails it; latency is Produce to the record's arrival at the consumer\n", cfg.Rate, cfg.LatencyTime, e2ePartitions)
	b.WriteString("- broker CPU seconds per GB: the node process's utime+stime over the produce and consume throughput workloads, over the payload bytes they moved (1 GB = 10^9 bytes)\n")
	fmt.Fprintf(&b, "- authorizer node: `authorizer.class.name=%s`, `super.users=%s`, `allow.everyone.if.no.acl.found=false`. Before the workloads, %s ACLs are created through the Admin API (CreateAcls, %d per request) by a client on INTERNAL presenting the node's certificate (the super user): the producer's, ALLOW `%s` WRITE on the LITERAL topic it writes, host `*`, which is all it needs (WRITE implies DESCRIBE, and Kafka lets WRITE on a topic stand for IDEMPOTENT_WRITE in InitProducerId); and %s others, none of which applies to it: 100 principals `User:app-000` to `app-099`, in turn a LITERAL topic `orders-NNNN`, a PREFIXED `team-NNNN-`, a LITERAL `bench-other-NNNN` and a PREFIXED `bench-NNNN-` (the last two sort beside the producer's topic `bench-sec-produce-N`), operations WRITE, READ and DESCRIBE in turn, every tenth DENY. The workloads start once DescribeAcls lists all %s and `%s` on PLAINTEXT is allowed its topic in Metadata and refused TOPIC_AUTHORIZATION_FAILED on a topic no ACL names (polled every %s, limit %s). The producer connects on PLAINTEXT as `%s`; the authorizer is on for every request, the node's own included\n",
		standardAuthorizer, brokerPrincipal, thousands(cfg.ACLs+1), aclChunk, anonymous, thousands(cfg.ACLs), thousands(cfg.ACLs+1), anonymous, clusterPoll, aclLoadLimit, anonymous)
	b.WriteString("- ratios: each round's ratio of the two nodes' figures (nodes of the same broker in the same round), then the median over rounds; a ratio over 1 is more records/s, or more latency or CPU, than the node without TLS or without the authorizer\n\n")

	vals, errs := gather(run.Rounds)
	note := func(target, figure string) string { return noAuthorizerNote(run, target, figure) }
	tlsRows, _ := tlsFigures(cfg.Rate)
	writeMedians(&b, "TLS (no authorizer): PLAINTEXT against SSL", tlsRows, cfg.Targets, vals, note)
	b.WriteString("\n")
	authRows, _ := authFigures(cfg.Rate, cfg.ACLs)
	writeMedians(&b, "Authorization (PLAINTEXT): no authorizer against StandardAuthorizer", authRows, cfg.Targets, vals, note)
	b.WriteString("\nHigher is better for records/s and MB/s; lower is better for latency and CPU.\n")
	noAuth := map[string][]string{}
	for t, why := range run.NoAuthorizer {
		noAuth[t] = []string{why}
	}
	writePerTarget(&b, "Authorization not run", cfg.Targets, noAuth)
	writePerTarget(&b, "Security failures", cfg.Targets, errs)
	writeCommands(&b, run.Commands)
	if run.Properties != "" {
		b.WriteString("\n### The authorizer node's server.properties (first round; the other nodes lack the three authorizer keys)\n\n```\n" + strings.TrimRight(run.Properties, "\n") + "\n```\n")
	}
	b.WriteString("\n" + securityEnd + "\n")
	return b.Bytes()
}
