package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration"
)

// MetaWorkload is the metadata workload: one client that, one request at
// a time, either creates a topic (Create: Value is its name) or sets an
// existing one's retention.ms to a value no other request sets (Alter:
// Key is the topic, Value the setting), and records each in History (OK
// acknowledged, Fail refused, Info unknown).
type MetaWorkload struct {
	Seeds []string
	// Prefix starts every topic's name ("<prefix>-<n>").
	Prefix string
	// Rate is requests a second (at most: each waits for the last).
	Rate int

	History *History
	Log     *slog.Logger
}

// retentionKey is the topic config the workload sets.
const retentionKey = "retention.ms"

// Run runs the client until ctx ends.
func (w *MetaWorkload) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.Seeds...), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(time.Second / time.Duration(w.Rate))
	defer tick.Stop()
	var created []string
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Not ctx: the end of the run must not make a request's outcome
		// unknown.
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if len(created) == 0 || seq%2 == 0 {
			name := fmt.Sprintf("%s-%d", w.Prefix, seq)
			inv := w.History.Add(Op{Process: "meta", Type: Invoke, F: Create, Seq: seq, Value: name})
			resp, err := adm.CreateTopic(rctx, 1, 1, nil, name)
			if err == nil {
				err = resp.Err
			}
			done := inv
			done.Type = createOutcome(err)
			if err != nil {
				done.Error = err.Error()
			}
			if done.Type == OK {
				created = append(created, name)
			}
			w.History.Add(done)
		} else {
			topic := created[int(seq/2)%len(created)]
			value := fmt.Sprint(3_600_000 + seq)
			inv := w.History.Add(Op{Process: "meta", Type: Invoke, F: Alter, Seq: seq, Key: topic, Value: value})
			resp, err := adm.AlterTopicConfigs(rctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: retentionKey, Value: kadm.StringPtr(value)}}, topic)
			if err == nil {
				var r kadm.AlterConfigsResponse
				if r, err = resp.On(topic, nil); err == nil {
					err = r.Err
				}
			}
			done := inv
			done.Type = alterOutcome(err)
			if err != nil {
				done.Error = err.Error()
			}
			w.History.Add(done)
		}
		cancel()
	}
}

// createOutcome classes a creation's answer: TOPIC_ALREADY_EXISTS means
// an earlier attempt of the same request made it (names are never
// reused); refusals that mean nothing was written are Fail.
func createOutcome(err error) Type {
	switch {
	case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
		return OK
	case errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidPartitions),
		errors.Is(err, kerr.InvalidTopicException), errors.Is(err, kerr.InvalidConfig), errors.Is(err, kerr.PolicyViolation):
		return Fail
	default:
		return Info
	}
}

// alterOutcome classes a config change's answer.
func alterOutcome(err error) Type {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, kerr.InvalidConfig), errors.Is(err, kerr.InvalidRequest), errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.PolicyViolation):
		return Fail
	default:
		return Info
	}
}

// DebugPort is where a Gregor node in the suite's network serves
// /debug/metadata (GREGOR_PPROF_ADDR), in its own namespace.
const DebugPort = 6060

// imageState is what a node's /debug/metadata says.
type imageState struct {
	Offset int64  `json:"offset"`
	Digest string `json:"digest"`
}

func fetchImage(ctx context.Context, addr string) (imageState, error) {
	var s imageState
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/metadata", nil)
	if err != nil {
		return s, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("metadata image of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("metadata image of %s: %s", addr, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("metadata image of %s: %w", addr, err)
	}
	return s, nil
}

// RecordImages waits up to wait for every node of cl (on net, with
// debug listeners: Gregor) to report the same metadata offset and
// digest, then records each node's last report as an Image op
// (Partition the node id, Offset and Value its image's offset and
// digest; Fail when it did not answer).
func RecordImages(ctx context.Context, h *History, cl *integration.Cluster, net *Network, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ops := untilAgreed(ctx, 200*time.Millisecond, func() ([]Op, bool) {
		var ops []Op
		same := true
		for _, n := range cl.Nodes {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			s, err := fetchImage(rctx, fmt.Sprintf("%s:%d", net.Host(n.ID), DebugPort))
			rcancel()
			op := Op{Process: "final", Type: OK, F: Image, Partition: int32(n.ID), Offset: s.Offset, Value: s.Digest}
			if err != nil {
				op.Type, op.Error = Fail, err.Error()
			}
			if err != nil || (len(ops) > 0 && (s.Offset != ops[0].Offset || s.Digest != ops[0].Value)) {
				same = false
			}
			ops = append(ops, op)
		}
		return ops, same
	})
	for _, op := range ops {
		h.Add(op)
	}
}

// untilAgreed asks round again, pause apart, until the answers it gathers
// agree or ctx ends, and returns the answers to record: the round that
// agreed or, at the deadline, the last round the deadline did not cut
// short (it fails every request still out, whatever the nodes would have
// said).
func untilAgreed(ctx context.Context, pause time.Duration, round func() ([]Op, bool)) []Op {
	var last []Op
	for {
		ops, agreed := round()
		if ctx.Err() != nil && last != nil {
			return last
		}
		if agreed || ctx.Err() != nil {
			return ops
		}
		last = ops
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// RecordBrokerViews asks every broker of cl for the topics named
// prefix-* it knows and their retention.ms, and records each answer as a
// BrokerView op (Partition the broker id; Configs topic -> value, "" for
// the default). Brokers may lag a little: it asks again, up to wait,
// until all of them agree.
func RecordBrokerViews(ctx context.Context, h *History, seeds []string, cl *integration.Cluster, prefix string, wait time.Duration) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("broker views client: %w", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ops := untilAgreed(ctx, 500*time.Millisecond, func() ([]Op, bool) {
		var ops []Op
		agree := true
		for _, b := range cl.Brokers() {
			view, err := brokerView(ctx, client.Broker(b.ID), prefix)
			op := Op{Process: "final", Type: OK, F: BrokerView, Partition: int32(b.ID), Configs: view}
			if err != nil {
				op.Type, op.Error, agree = Fail, err.Error(), false
			} else if len(ops) > 0 && !sameView(view, ops[0].Configs) {
				agree = false
			}
			ops = append(ops, op)
		}
		return ops, agree
	})
	for _, op := range ops {
		h.Add(op)
	}
	return nil
}

func sameView(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// brokerView is one broker's own answer: its Metadata, then
// DescribeConfigs of the topics it listed.
func brokerView(ctx context.Context, b *kgo.Broker, prefix string) (map[string]string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mreq := kmsg.NewPtrMetadataRequest()
	mresp, err := mreq.RequestWith(rctx, b)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	view := map[string]string{}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range mresp.Topics {
		if t.Topic == nil || !strings.HasPrefix(*t.Topic, prefix+"-") {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", *t.Topic, err)
		}
		view[*t.Topic] = ""
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = *t.Topic
		r.ConfigNames = []string{retentionKey}
		dreq.Resources = append(dreq.Resources, r)
	}
	if len(dreq.Resources) == 0 {
		return view, nil
	}
	dresp, err := dreq.RequestWith(rctx, b)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	for _, r := range dresp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("configs of %s: %w", r.ResourceName, err)
		}
		for _, c := range r.Configs {
			if c.Name == retentionKey && c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				view[r.ResourceName] = *c.Value
			}
		}
	}
	return view, nil
}

// The metadata invariants (CheckMeta).
const (
	// MetaLost: an acknowledged topic creation or config change is
	// missing from a broker's view after the faults were healed.
	MetaLost Kind = "meta-lost"
	// MetaDiverged: the nodes' metadata images did not converge to one
	// offset and digest, or two nodes at one offset have different
	// digests.
	MetaDiverged Kind = "meta-diverged"
	// MetaBrokersDisagree: two brokers' views differ after they were
	// given time to agree.
	MetaBrokersDisagree Kind = "meta-brokers-disagree"
)

// MetaKinds are the kinds CheckMeta reports, in the order it prints
// them (Unexpected: a topic or value no request could have made).
var MetaKinds = []Kind{MetaLost, MetaDiverged, MetaBrokersDisagree, Unexpected}

// MetaSummary is what CheckMeta found.
type MetaSummary struct {
	Requests, Acked, Failed, Indeterminate int
	Brokers, Images                        int // views and image reports
	Violations                             []Violation
}

// Count is the number of violations of kind k.
func (s MetaSummary) Count(k Kind) int { return countKind(s.Violations, k) }

func (s MetaSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "metadata: %d requests, %d acked, %d failed, %d indeterminate; %d broker views, %d image reports\n",
		s.Requests, s.Acked, s.Failed, s.Indeterminate, s.Brokers, s.Images)
	writeViolations(&b, s.Violations, MetaKinds)
	return b.String()
}

// CheckMeta holds a history's metadata requests to the brokers' final
// views (BrokerView ops) and the nodes' images (Image ops): every
// acknowledged creation is on every broker, every topic there was asked
// for by a creation that did not certainly fail, each topic's retention
// is its last acknowledged value or one of a later request whose outcome
// is unknown, the brokers agree, and the images converged. With no
// Image op (a target without /debug/metadata) the images are not
// checked.
func CheckMeta(ops []Op) MetaSummary {
	var s MetaSummary
	add := func(k Kind, format string, args ...any) {
		s.Violations = append(s.Violations, Violation{Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	type request struct {
		op      Op
		outcome Type
	}
	var reqs []*request
	bySeq := map[int64]*request{}
	var views, images []Op
	for _, op := range ops {
		switch {
		case (op.F == Create || op.F == Alter) && op.Type == Invoke:
			r := &request{op: op, outcome: Info}
			reqs = append(reqs, r)
			bySeq[op.Seq] = r
		case op.F == Create || op.F == Alter:
			if r := bySeq[op.Seq]; r != nil {
				r.outcome = op.Type
			}
		case op.F == BrokerView:
			views = append(views, op)
		case op.F == Image:
			images = append(images, op)
		}
	}
	createdMaybe := map[string]bool{}
	var created []string
	// allowed is each topic's values that may be final: the last acked
	// and any unknown after it. A topic with no acked change may have
	// the default or any value of maybe, its unknown changes.
	allowed := map[string][]string{}
	maybe := map[string][]string{}
	for _, r := range reqs {
		s.Requests++
		tally(r.outcome, &s.Acked, &s.Failed, &s.Indeterminate)
		switch {
		case r.op.F == Create && r.outcome != Fail:
			createdMaybe[r.op.Value] = true
			if r.outcome == OK {
				created = append(created, r.op.Value)
			}
		case r.op.F == Alter && r.outcome == OK:
			allowed[r.op.Key] = []string{r.op.Value}
		case r.op.F == Alter && r.outcome == Info:
			if _, ok := allowed[r.op.Key]; ok {
				allowed[r.op.Key] = append(allowed[r.op.Key], r.op.Value)
			}
			maybe[r.op.Key] = append(maybe[r.op.Key], r.op.Value)
		}
	}
	s.Brokers, s.Images = len(views), len(images)
	if len(views) == 0 {
		add(MetaLost, "no broker view: nothing shows that the %d acknowledged requests survived", s.Acked)
	}
	for i, v := range views {
		if v.Type != OK {
			add(MetaLost, "broker %d gave no view: %s", v.Partition, v.Error)
			continue
		}
		if i > 0 && views[0].Type == OK && !sameView(v.Configs, views[0].Configs) {
			add(MetaBrokersDisagree, "broker %d's view differs from broker %d's: %s", v.Partition, views[0].Partition, viewDiff(v.Configs, views[0].Configs))
		}
		for _, t := range created {
			if _, ok := v.Configs[t]; !ok {
				add(MetaLost, "%s created (acknowledged), missing on broker %d", t, v.Partition)
			}
		}
		var topics []string
		for t := range v.Configs {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		for _, t := range topics {
			val := v.Configs[t]
			if !createdMaybe[t] {
				add(Unexpected, "%s on broker %d, never asked for or refused", t, v.Partition)
				continue
			}
			if want, ok := allowed[t]; ok && !slices.Contains(want, val) {
				add(MetaLost, "%s's %s on broker %d is %q, want the last acknowledged %q (or a later unknown of %v)", t, retentionKey, v.Partition, val, want[0], want[1:])
			} else if !ok && val != "" && !slices.Contains(maybe[t], val) {
				add(Unexpected, "%s's %s on broker %d is %q, which no request set", t, retentionKey, v.Partition, val)
			}
		}
	}
	checkImages(add, images)
	return s
}

func viewDiff(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			d = append(d, fmt.Sprintf("%s=%q (other %q)", k, v, w))
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s missing (other %q)", k, w))
		}
	}
	slices.Sort(d)
	return strings.Join(d, ", ")
}

// checkImages: every node answered, at one offset with one digest.
func checkImages(add func(Kind, string, ...any), images []Op) {
	byOffset := map[int64]string{}
	for _, im := range images {
		if im.Type != OK {
			add(MetaDiverged, "node %d did not report its image: %s", im.Partition, im.Error)
			continue
		}
		if d, ok := byOffset[im.Offset]; ok && d != im.Value {
			add(MetaDiverged, "node %d's image at offset %d has digest %s, another node's there %s", im.Partition, im.Offset, im.Value, d)
		}
		byOffset[im.Offset] = im.Value
	}
	if len(byOffset) > 1 {
		var at []string
		for _, im := range images {
			at = append(at, fmt.Sprintf("node %d at %d", im.Partition, im.Offset))
		}
		add(MetaDiverged, "the images did not converge to one offset: %s", strings.Join(at, ", "))
	}
}
