package faults

// The campaign: FAULTS_SCHEDULES (20) randomized schedules, each a fresh
// cluster (a layout of FAULTS_LAYOUTS, every node in its own network
// namespace) running the queue, transactions, metadata and share-group
// workloads together for FAULTS_DURATION under the nemesis its plan
// drew, then checked. The
// plans come from FAULTS_SEED (random when unset, printed first and
// last), so FAULTS_SEED=<seed> replays a campaign and
// `-run 'TestFaultCampaign/s07-'` one schedule of it; FAULTS_NEMESIS=a
// or a+b (catalogue names) puts one nemesis in every schedule.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// campaignRow is one line of the campaign's table: one workload of one
// schedule.
type campaignRow struct {
	schedule, nemesis, workload          string
	ops, acked, lost, duplicated, broken int
	faults                               int
	note                                 string
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%s: want a positive integer", name, s)
	}
	return n
}

// campaignLayouts are FAULTS_LAYOUTS (comma-separated), or every layout
// of Layouts, in a fixed order: a plan's draw depends on it.
func campaignLayouts(t *testing.T) []integration.ClusterLayout {
	var all []integration.ClusterLayout
	for l := range Layouts {
		all = append(all, l)
	}
	slices.Sort(all)
	s := os.Getenv("FAULTS_LAYOUTS")
	if s == "" {
		return all
	}
	var out []integration.ClusterLayout
	for _, name := range strings.Split(s, ",") {
		l := integration.ClusterLayout(strings.TrimSpace(name))
		if !slices.Contains(all, l) {
			t.Fatalf("FAULTS_LAYOUTS: %q is not one of %v", l, all)
		}
		out = append(out, l)
	}
	return out
}

func TestFaultCampaign(t *testing.T) {
	if os.Getenv("FAULTS") != "1" {
		t.Skip("the fault suite runs with FAULTS=1 (make faults TARGET=gregor-cluster|kafka-cluster)")
	}
	seed := rand.Uint64()
	if s := os.Getenv("FAULTS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FAULTS_SEED=%s: %v", s, err)
		}
	}
	n := envInt(t, "FAULTS_SCHEDULES", 20)
	layouts := campaignLayouts(t)
	t.Logf("campaign FAULTS_SEED=%d: %d schedules of %s on %v (replay: FAULTS_SEED=%d FAULTS_SCHEDULES=%d FAULTS_LAYOUTS=%s, one schedule with -run 'TestFaultCampaign/sNN-')",
		seed, n, duration(t), layouts, seed, n, joinLayouts(layouts))
	var rows []campaignRow
	for i := range n {
		p := NewPlan(seed, i, layouts)
		if names := os.Getenv("FAULTS_NEMESIS"); names != "" {
			var err error
			if p, err = p.WithNemeses(names); err != nil {
				t.Fatalf("FAULTS_NEMESIS=%s: %v", names, err)
			}
		}
		var got []campaignRow
		ran := false
		passed := t.Run(p.Name(), func(t *testing.T) {
			ran = true
			t.Logf("plan: layout %s, nemesis %s, faults held %s, run seed %d", p.Layout, p.NemesisName(), p.Hold, p.RunSeed)
			got = runSchedule(t, p)
		})
		if !ran {
			continue // not matched by -run
		}
		if got == nil {
			got = []campaignRow{{schedule: p.Name(), nemesis: p.NemesisName(), workload: "-"}}
		}
		if !passed {
			for i := range got {
				got[i].note = "FAILED (see the schedule's log)"
			}
		}
		rows = append(rows, got...)
	}
	t.Logf("campaign FAULTS_SEED=%d against %s:\n%s", seed, faultTarget(), campaignTable(rows))
}

func joinLayouts(ls []integration.ClusterLayout) string {
	var s []string
	for _, l := range ls {
		s = append(s, string(l))
	}
	return strings.Join(s, ",")
}

func campaignTable(rows []campaignRow) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "schedule\tnemesis\tworkload\tfaults\toperations\tacknowledged\tlost\tduplicated\tviolations\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", r.schedule, r.nemesis, r.workload, r.faults, r.ops, r.acked, r.lost, r.duplicated, r.broken, r.note)
	}
	_ = tw.Flush()
	return b.String()
}

// runSchedule runs one plan on a fresh cluster and checks both
// workloads' histories; it returns their rows.
func runSchedule(t *testing.T, p Plan) []campaignRow {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startLayout(t, ctx, p.Layout, true)
	f := e.faults
	f.Rng = rand.New(rand.NewPCG(p.RunSeed, uint64(p.Index)))
	const txnTopic = "faults-txn"
	if err := CreateTopic(ctx, e.target, f.Admin, txnTopic); err != nil {
		t.Fatal(err)
	}
	const shareTopic, shareGroup = "faults-share", "faults-share-group"
	if err := CreateTopic(ctx, e.target, f.Admin, shareTopic); err != nil {
		t.Fatal(err)
	}
	if err := ConfigureShareGroup(ctx, f.Client, shareGroup); err != nil {
		t.Fatal(err)
	}
	h := NewHistory()
	queue := e.queueWorkload(h)
	queue.Churn = 10 * time.Second // members leave and join all along
	txns := &TxnWorkload{Seeds: e.seeds, Topic: txnTopic, TxnPrefix: "faults-txn", Producers: 2, Partitions: TopicPartitions,
		Rate: 10, Abort: 0.2, History: h, Log: e.log}
	meta := &MetaWorkload{Seeds: e.seeds, Prefix: "meta", Rate: 2, History: h, Log: e.log}
	share := &ShareWorkload{Seeds: e.seeds, Topic: shareTopic, Group: shareGroup, Consumers: 2, Rate: 20, Keys: 30,
		DeliveryTimeout: 30 * time.Second, Drain: 90 * time.Second, History: h, Log: e.log}
	nem := p.Nemesis(f)
	healOnCleanup(t, nem)
	runCtx, stop := context.WithTimeout(ctx, duration(t))
	defer stop()
	var wg sync.WaitGroup
	var queueErr, txnErr, metaErr, shareErr, nemErr error
	wg.Add(5)
	go func() { defer wg.Done(); queueErr = queue.Run(runCtx) }()
	go func() { defer wg.Done(); txnErr = txns.Run(runCtx) }()
	go func() { defer wg.Done(); metaErr = meta.Run(runCtx) }()
	go func() { defer wg.Done(); shareErr = share.Run(runCtx, f.Admin) }()
	go func() {
		defer wg.Done()
		nemErr = RunNemesis(runCtx, h, e.log, f, nem, Schedule{Hold: p.Hold, Settle: 40 * time.Second, Between: 3 * time.Second})
	}()
	wg.Wait()
	for what, err := range map[string]error{"nemesis " + nem.Name(): nemErr, "queue workload": queueErr, "transactions workload": txnErr, "metadata workload": metaErr, "share workload": shareErr} {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	e.finalReads(t, ctx, h, queue.Group)
	if err := RecordTxnRead(ctx, h, e.log, e.seeds, f.Admin, txnTopic); err != nil {
		t.Errorf("read_committed final read: %v", err)
	}
	if e.target == "gregor-cluster" {
		RecordImages(ctx, h, f.Cluster, f.Net, time.Minute)
	}
	if err := RecordBrokerViews(ctx, h, e.seeds, f.Cluster, meta.Prefix, time.Minute); err != nil {
		t.Errorf("brokers' metadata views: %v", err)
	}
	path := filepath.Join(e.dir, "history.jsonl")
	if err := h.WriteFile(path); err != nil {
		t.Error(err)
	}
	ops := h.Ops()
	qs, ts, ms, ss := Check(ops), CheckTxn(ops), CheckMeta(ops), CheckShare(ops)
	t.Logf("queue workload:\n%s", qs)
	t.Logf("transactions workload:\n%s", ts)
	t.Logf("metadata workload:\n%s", ms)
	t.Logf("share workload:\n%s", ss)
	if n := len(qs.Violations) + len(ts.Violations) + len(ms.Violations) + len(ss.Violations); n > 0 {
		t.Errorf("%d violations (history: %s)", n, path)
	}
	if qs.Acked == 0 || qs.Faults == 0 || ts.Committed == 0 || ms.Acked == 0 || ss.Accepted == 0 {
		t.Errorf("the run proves nothing: %d acknowledged writes, %d committed transactions, %d acknowledged metadata requests, %d share records accepted, %d faults",
			qs.Acked, ts.Committed, ms.Acked, ss.Accepted, qs.Faults)
	}
	return []campaignRow{
		{schedule: p.Name(), nemesis: p.NemesisName(), workload: "queue+group", faults: qs.Faults,
			ops: qs.Sends + qs.Polls + qs.CommitsOK + qs.CommitsFailed, acked: qs.Acked,
			lost: qs.Count(Lost), duplicated: qs.Count(Duplicate), broken: len(qs.Violations)},
		{schedule: p.Name(), nemesis: p.NemesisName(), workload: "transactions", faults: qs.Faults,
			ops: ts.Txns + ts.Polls, acked: ts.Committed,
			lost: ts.Count(TxnLost), duplicated: ts.Count(Duplicate), broken: len(ts.Violations)},
		{schedule: p.Name(), nemesis: p.NemesisName(), workload: "metadata", faults: qs.Faults,
			ops: ms.Requests, acked: ms.Acked, lost: ms.Count(MetaLost), broken: len(ms.Violations)},
		{schedule: p.Name(), nemesis: p.NemesisName(), workload: "share group", faults: qs.Faults,
			ops: ss.Sends + ss.Polls + ss.AcceptsOK + ss.AcceptsUnknown, acked: ss.Acked,
			lost: ss.Count(ShareLost) + ss.Count(ShareStuck), duplicated: ss.Count(ShareAcceptedAgain), broken: len(ss.Violations)},
	}
}
