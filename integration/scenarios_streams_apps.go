package integration

// Kafka Streams applications beyond WordCount (StreamsApps.java): a
// stream-table join, a windowed aggregation with suppression, a
// foreign-key join, and a stateful app queried interactively across a
// kill -9 of one of its two instances. Each runs with group.protocol
// classic and streams (KIP-1071). The input is generated here and the
// expected output computed by a model of the topology
// (streamsapps_model.go); the scenario passes when the app's output, read
// with read_committed, is the model's: under exactly_once_v2 every key's
// updates exactly, in order; under at_least_once in order with repeats
// allowed, ending at the model's value. The same expected output is
// checked on every target, so a pass on kafka and on gregor means Gregor
// makes the app write what it writes on Kafka 4.3.1. On a cluster target
// every topic, the app's internal ones included, has 3 replicas
// (streamsReplicas), as a production app's would.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// appRun is how a scenario runs its app.
type appRun struct {
	protocol  string // group.protocol: classic or streams
	guarantee string // processing.guarantee
}

func (r appRun) exact() bool { return r.guarantee == "exactly_once_v2" }

// props are the run's properties with the topology's own.
func (r appRun) props(own map[string]string) map[string]string {
	p := map[string]string{"group.protocol": r.protocol, "processing.guarantee": r.guarantee}
	maps.Copy(p, own)
	return p
}

// name is the scenario name's suffix for the run.
func (r appRun) name() string {
	g := "eos-v2"
	if !r.exact() {
		g = "alos"
	}
	if r.protocol == "streams" {
		return g + "-streams-protocol"
	}
	return g
}

func (r appRun) describe() string {
	return fmt.Sprintf("processing.guarantee=%s, group.protocol=%s", r.guarantee, r.protocol)
}

// sameOnBothTargets ends every Doc: the scenario's expectation is the
// model's, whatever the target.
const sameOnBothTargets = "; the expected output is computed by a model of the topology and is the same on every target, so passing on kafka and gregor means the app's output on Gregor is what it is on Kafka " + KafkaVersion

func streamsAppScenarios() []Scenario {
	var out []Scenario
	classicEOS := appRun{"classic", "exactly_once_v2"}
	streamsEOS := appRun{"streams", "exactly_once_v2"}
	classicALOS := appRun{"classic", "at_least_once"}
	streamsALOS := appRun{"streams", "at_least_once"}
	// Each app with both protocols and both guarantees; the kill drills
	// with exactly_once_v2 only: a running sum is not idempotent, so
	// under at_least_once input processed again after a kill is added
	// twice, as Kafka documents, and no model gives the app's output.
	all := []appRun{classicEOS, streamsEOS, classicALOS, streamsALOS}
	apps := []struct {
		name, doc string
		timeout   time.Duration
		run       func(context.Context, *Env, appRun) error
	}{
		{"stream-table-join", "KStream.join(KTable), %s: orders joined with the customer table (co-partitioned, 3 partitions); " +
			"the table and the first orders are in before the app starts (timestamp synchronisation must read the table first), table changes and more orders while it runs; " +
			"every order of a known customer joined with the customer's value then, the others dropped", 6 * time.Minute, streamsTableJoin},
		{"windowed-suppress", "tumbling-window aggregation (10 s windows, 5 s grace, event time from the records) with suppress(untilWindowCloses), %s: " +
			"readings in and out of order, some past the grace period; exactly one final count:sum per closed window, late readings left out", 6 * time.Minute, streamsWindowed},
		{"fk-join", "KTable-KTable foreign-key join (orders on 2 partitions → products on 3, through the subscription-registration and -response topics), %s: " +
			"in phases, orders, product changes and a product deleted, orders changing quantity or product or deleted, products changing again; every order's results (tombstones included) in order", 7 * time.Minute, streamsFKJoin},
	}
	for _, app := range apps {
		for _, run := range all {
			out = append(out, Scenario{
				Name:    "streams/" + app.name + "-" + run.name(),
				Doc:     "Kafka Streams " + KafkaVersion + " " + fmt.Sprintf(app.doc, run.describe()) + sameOnBothTargets,
				Timeout: app.timeout,
				Run:     func(ctx context.Context, e *Env) error { return app.run(ctx, e, run) },
			})
		}
	}
	for _, run := range []appRun{classicEOS, streamsEOS} {
		detection := "session.timeout.ms=10000 in the app"
		if run.protocol == "streams" {
			detection = "the default streams.session.timeout.ms, 45 s"
		}
		out = append(out, Scenario{
			Name: "streams/iq-standby-kill9-" + run.name(),
			Doc: "Kafka Streams " + KafkaVersion + " running sums in a store queried through interactive queries (application.server, an HTTP endpoint in the app), two instances of one thread with one standby replica each, " + run.describe() + ": " +
				"both serve, each holds every key between its active and standby tasks; one is killed with SIGKILL while input flows; once the group drops it (" + detection + ") the survivor runs every task, " +
				"restores little (its standbys were current), answers for every key, and every sum update is in the output exactly once; the group described before and after" + sameOnBothTargets,
			Timeout: 8 * time.Minute,
			Run:     func(ctx context.Context, e *Env) error { return streamsIQKill(ctx, e, run, false) },
		})
	}
	for _, run := range []appRun{classicEOS, streamsEOS} {
		out = append(out, Scenario{
			Name: "streams/broker-kill9-" + run.name(),
			Doc: "Kafka Streams " + KafkaVersion + " running sums, two instances of one thread, " + run.describe() + ": while input flows, kill -9 of a broker, restarted after 10 s " +
				"(on a cluster target the broker coordinating the app's group, with every topic on 3 replicas, so that the group and its offsets move to another coordinator; on a single-node target the scenario's own node): " +
				"both instances ride it out without a restart, the group is back to two members (for a streams group Stable, each member's tasks the ones its instance runs), and every sum update is in the output exactly once" + sameOnBothTargets,
			Timeout: 8 * time.Minute,
			Run:     func(ctx context.Context, e *Env) error { return streamsBrokerKill(ctx, e, run) },
		})
	}
	out = append(out, Scenario{
		Name: "streams/iq-standby-kill9-eos-v2-streams-protocol-short-session",
		Doc: "the streams-protocol kill -9 drill on a node of its own started with group.streams.min.session.timeout.ms=5000 and group.streams.min.heartbeat.interval.ms=1000, the group given " +
			strings.Join(shortSession, " and ") + " with kafka-configs: the survivor takes over within 30 s of the kill, and all else as in the drill" + sameOnBothTargets,
		Timeout:  8 * time.Minute,
		OwnNodes: true,
		Run:      func(ctx context.Context, e *Env) error { return streamsIQKill(ctx, e, streamsEOS, true) },
	})
	return out
}

// appEnv is what every app scenario sets up: a client, the output's
// reader and the app's instances, all closed or stopped when it ends.
type appEnv struct {
	e         *Env
	bootstrap string // the target's, or a node's the scenario started
	cl        *kgo.Client
	reader    *outputReader
	appID     string
	apps      streamsApps
	// replicas is the topics' replication factor, and the app's
	// replication.factor for its internal topics.
	replicas int
}

// newAppEnv creates the topics with replicas each and the output's
// reader; the app's internal topics get as many.
func newAppEnv(ctx context.Context, e *Env, bootstrap string, topics map[string]int32, replicas int, output string) (*appEnv, error) {
	cl, err := streamsClient(bootstrap)
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, cl.Close)
	if err := createTopics(ctx, cl, topics, int16(replicas)); err != nil {
		return nil, err
	}
	r, err := newOutputReader(bootstrap, output, topics[output])
	if err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, r.Close)
	return &appEnv{e: e, bootstrap: bootstrap, cl: cl, reader: r, appID: e.Name("app"), replicas: replicas}, nil
}

// start starts an instance in e.Dir/name; it is stopped when the scenario
// ends if the scenario has not stopped it.
func (a *appEnv) start(ctx context.Context, name, topology string, props map[string]string) (StreamsApp, *Proc, error) {
	props = maps.Clone(props)
	if _, ok := props["replication.factor"]; !ok {
		props["replication.factor"] = fmt.Sprint(a.replicas)
	}
	app := StreamsApp{Topology: topology, Bootstrap: a.bootstrap, AppID: a.appID, Dir: filepath.Join(a.e.Dir, name), Props: props}
	proc, err := a.e.Tools.StartStreamsApp(ctx, app)
	if err != nil {
		return app, nil, err
	}
	a.e.cleanups = append(a.e.cleanups, func() { _ = proc.Stop(stopGrace) })
	a.apps = append(a.apps, proc)
	return app, proc, nil
}

// finish waits for the app to catch up with its inputs and to have
// written want records, reads the output to the end markers, checks it
// against want, and stops the app (a clean close must work too).
func (a *appEnv) finish(ctx context.Context, run appRun, inputs []string, want updates) ([]outputRecord, error) {
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, inputs, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := a.reader.waitCount(ctx, a.apps, want, time.Minute); err != nil {
		return nil, err
	}
	got, err := a.reader.finish(ctx, a.e, a.apps, time.Minute)
	if err != nil {
		return nil, err
	}
	if err := checkUpdates(got, want, run.exact()); err != nil {
		return nil, err
	}
	for i, p := range a.apps {
		if exited, _ := p.Exited(); exited {
			continue
		}
		if err := p.Stop(45 * time.Second); err != nil {
			return nil, fmt.Errorf("stopping instance %d: %w", i, err)
		}
	}
	return got, nil
}

// describeGroup is a one-line account of the app's group from the tools
// for its protocol, checked to have one member (one thread) per instance.
// For a streams group the members' assignments must also be the tasks the
// instances say they run (instances: each one's /tasks).
func (a *appEnv) describeGroup(ctx context.Context, run appRun, instances []iqTasks) (string, error) {
	members := len(instances)
	if run.protocol == "streams" {
		summary, rows, err := checkStreamsGroupTool(ctx, a.e, a.bootstrap, a.appID, members, members)
		if err != nil {
			return "", err
		}
		var want, got []string
		for _, t := range instances {
			want = append(want, fmt.Sprintf("active %v standby %v", t.Active, t.Standby))
		}
		var assigned []string
		for _, r := range rows {
			f := strings.Fields(r)
			text := strings.Join(f[8:], " ")
			assigned = append(assigned, text)
			tasks, err := parseStreamsAssignments(text)
			if err != nil {
				return "", err
			}
			got = append(got, fmt.Sprintf("active %v standby %v", tasks["ACTIVE"], tasks["STANDBY"]))
			if !slices.Equal(tasks["ACTIVE"], tasks["TARGET-ACTIVE"]) || !slices.Equal(tasks["STANDBY"], tasks["TARGET-STANDBY"]) {
				return "", fmt.Errorf("kafka-streams-groups shows a member whose tasks are not its target in a Stable group: %q", r)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			return "", fmt.Errorf("kafka-streams-groups --describe --members shows the assignments %v, the instances run %v", got, want)
		}
		return summary + " [" + strings.Join(assigned, " | ") + "]", nil
	}
	var rows []string
	err := until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		out, err := a.e.KafkaOn(ctx, a.bootstrap, "", mainGroups, "--describe", "--group", a.appID, "--members")
		if err != nil {
			return false, err
		}
		rows = rows[:0]
		for _, l := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == a.appID {
				rows = append(rows, l)
			}
		}
		if len(rows) != members {
			return false, fmt.Errorf("kafka-consumer-groups --describe --members shows %d members of %s, want %d: %q", len(rows), a.appID, members, out.Stdout)
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("kafka-consumer-groups: %d members", members), nil
}

func streamsTableJoin(ctx context.Context, e *Env, run appRun) error {
	customers, orders, output := e.Name("customers"), e.Name("orders"), e.Name("enriched")
	a, err := newAppEnv(ctx, e, e.Bootstrap(), map[string]int32{customers: 3, orders: 3, output: 3}, streamsReplicas(e), output)
	if err != nil {
		return err
	}
	w := newJoinWorkload(customers, orders, 3, time.Now().Truncate(time.Second))
	if err := produceInput(ctx, a.cl, w.phases[0]); err != nil {
		return err
	}
	if _, _, err := a.start(ctx, "app", "join", run.props(map[string]string{"app.input": orders, "app.table": customers, "app.output": output})); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, []string{customers, orders}, 2*time.Minute); err != nil {
		return err
	}
	// The table's changes must be in the store before the orders that
	// should see them are read: the app's committed offset of the table
	// says so (the changes are in its store's changelog, committed with
	// the offset).
	if err := produceInput(ctx, a.cl, w.phases[1]); err != nil {
		return err
	}
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, []string{customers}, time.Minute); err != nil {
		return err
	}
	if err := produceInput(ctx, a.cl, w.phases[2]); err != nil {
		return err
	}
	got, err := a.finish(ctx, run, []string{customers, orders}, w.want)
	if err != nil {
		return err
	}
	e.Notef("%d orders, %d customer records: %d joined results as the model's, %d keys", len(w.phases[0])+len(w.phases[2])-countTopic(w.phases[0], customers),
		countTopic(w.phases[0], customers)+len(w.phases[1]), len(got), len(w.want))
	return nil
}

func countTopic(recs []inputRecord, topic string) int {
	n := 0
	for _, r := range recs {
		if r.Topic == topic {
			n++
		}
	}
	return n
}

func streamsWindowed(ctx context.Context, e *Env, run appRun) error {
	input, output := e.Name("readings"), e.Name("windows")
	a, err := newAppEnv(ctx, e, e.Bootstrap(), map[string]int32{input: 3, output: 3}, streamsReplicas(e), output)
	if err != nil {
		return err
	}
	// Event times start a minute back so that the flush records, far
	// ahead of the readings, are not in the future by more than the
	// brokers accept (message.timestamp.after.max.ms, an hour).
	w := newWindowWorkload(input, 3, time.Now().Add(-time.Minute).Truncate(time.Second))
	half := len(w.input) / 2
	if err := produceInput(ctx, a.cl, w.input[:half]); err != nil {
		return err
	}
	if _, _, err := a.start(ctx, "app", "window", run.props(map[string]string{"app.input": input, "app.output": output,
		"app.window.ms": fmt.Sprint(w.window.Milliseconds()), "app.grace.ms": fmt.Sprint(w.grace.Milliseconds())})); err != nil {
		return err
	}
	if err := produceInput(ctx, a.cl, w.input[half:]); err != nil {
		return err
	}
	got, err := a.finish(ctx, run, []string{input}, w.want)
	if err != nil {
		return err
	}
	e.Notef("%d readings (%d late): %d closed windows' final results as the model's", len(w.input), w.late, len(got))
	return nil
}

func streamsFKJoin(ctx context.Context, e *Env, run appRun) error {
	orders, products, output := e.Name("orders"), e.Name("products"), e.Name("order-products")
	a, err := newAppEnv(ctx, e, e.Bootstrap(), map[string]int32{orders: 2, products: 3, output: 3}, streamsReplicas(e), output)
	if err != nil {
		return err
	}
	w := newFKWorkload(orders, products, 2, 3, time.Now().Truncate(time.Second))
	if err := produceInput(ctx, a.cl, w.phases[0]); err != nil {
		return err
	}
	if _, _, err := a.start(ctx, "app", "fkjoin", run.props(map[string]string{"app.input": orders, "app.table": products, "app.output": output})); err != nil {
		return err
	}
	inputs := []string{orders, products}
	for phase := range w.phases {
		if phase > 0 {
			if err := produceInput(ctx, a.cl, w.phases[phase]); err != nil {
				return err
			}
		}
		// Each phase's updates must meet the tables as the phases before
		// left them: the app has read all input so far and written every
		// result of it.
		if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, inputs, 2*time.Minute); err != nil {
			return fmt.Errorf("phase %d: %w", phase, err)
		}
		if err := a.reader.waitCount(ctx, a.apps, w.wantAfter[phase], time.Minute); err != nil {
			return fmt.Errorf("phase %d: %w", phase, err)
		}
	}
	got, err := a.finish(ctx, run, inputs, w.want)
	if err != nil {
		return err
	}
	tombstones := 0
	for _, r := range got {
		if r.Value == nil {
			tombstones++
		}
	}
	// The subscriptions go by product to the products' partitions, the
	// responses by order to the orders'.
	topics, err := kadm.NewClient(a.cl).ListTopics(ctx)
	if err != nil {
		return err
	}
	wantParts := map[string]int{"SUBSCRIPTION-REGISTRATION": 3, "SUBSCRIPTION-RESPONSE": 2}
	var fk []string
	for _, t := range topics.Sorted() {
		name := strings.TrimPrefix(t.Topic, a.appID+"-")
		for kind, n := range wantParts {
			if name != t.Topic && strings.Contains(name, kind) && strings.HasSuffix(name, "-topic") {
				if len(t.Partitions) != n {
					return fmt.Errorf("%s has %d partitions, want %d", t.Topic, len(t.Partitions), n)
				}
				fk = append(fk, fmt.Sprintf("%s (%d partitions)", name, n))
			}
		}
	}
	if len(fk) != 2 {
		return fmt.Errorf("want one subscription-registration and one -response topic of the app, found %v", fk)
	}
	e.Notef("%d results (%d tombstones) for %d orders, as the model's; through %v", len(got), tombstones, len(w.want), fk)
	return nil
}

// shortSession is the streams group config of the drill on a node of its
// own: B is dropped 8 s after its last heartbeat, not 45 s.
var shortSession = []string{"streams.session.timeout.ms=8000", "streams.heartbeat.interval.ms=2000"}

// streamsIQKill is the kill -9 drill: two instances of the sums app with a
// standby each, one killed while input flows. With ownNode (streams
// protocol only) it runs on a node it starts whose lower bounds let the
// group's config shorten the session (shortSession), and B must be
// replaced well before the default session timeout would drop it.
func streamsIQKill(ctx context.Context, e *Env, run appRun, ownNode bool) error {
	const partitions = 4
	input, output := e.Name("deltas"), e.Name("sums")
	bootstrap := e.Bootstrap()
	groupConfigs := []string{"streams.num.standby.replicas=1"}
	if ownNode {
		n, err := e.StartNode(ctx, NodeSpec{Properties: map[string]string{
			"group.streams.min.session.timeout.ms":    "5000",
			"group.streams.min.heartbeat.interval.ms": "1000",
		}})
		if err != nil {
			return err
		}
		bootstrap = n.Bootstrap()
		groupConfigs = append(groupConfigs, shortSession...)
	}
	replicas := streamsReplicas(e)
	if ownNode {
		replicas = 1
	}
	a, err := newAppEnv(ctx, e, bootstrap, map[string]int32{input: partitions, output: partitions}, replicas, output)
	if err != nil {
		return err
	}
	base := time.Now().Truncate(time.Second)
	before := newSumsWorkload(input, partitions, 400, 1, base, nil)
	after := newSumsWorkload(input, partitions, 1200, 2, base.Add(time.Second), &before)
	props := run.props(map[string]string{"app.input": input, "app.output": output, "num.stream.threads": "1", "num.standby.replicas": "1"})
	if run.protocol == "streams" {
		// Under KIP-1071 the group's config decides the standbys; the
		// client's num.standby.replicas is ignored (with a warning).
		out, err := e.KafkaOn(ctx, bootstrap, "", mainConfigs, "--entity-type", "groups", "--entity-name", a.appID, "--alter", "--add-config", strings.Join(groupConfigs, ","))
		if err != nil {
			return fmt.Errorf("setting %v on the group: %w", groupConfigs, err)
		}
		if !strings.Contains(out.Stdout, "Completed updating config") {
			return fmt.Errorf("kafka-configs --alter on group %s: %s", a.appID, out.Tail())
		}
	} else {
		props["session.timeout.ms"] = "10000"
	}
	procA, procB, iqA, iqB, err := a.startTwoSums(ctx, props, input, before)
	if err != nil {
		return err
	}

	// Both serve: between them their active stores hold every key, each
	// key where the app's metadata says, and each instance's standbys
	// complete its own store to every key (one standby, two instances).
	var tasksA, tasksB iqTasks
	var problem error
	err = until(ctx, 2*time.Minute, 500*time.Millisecond, func() (bool, error) {
		if err := a.apps.alive(); err != nil {
			return false, err
		}
		problem = checkTwoInstances(ctx, before.final, iqA, iqB, &tasksA, &tasksB)
		return problem == nil, nil
	})
	if err != nil {
		return fmt.Errorf("before the kill: %w (last: %v)", err, problem)
	}
	groupBefore, err := a.describeGroup(ctx, run, []iqTasks{tasksA, tasksB})
	if err != nil {
		return fmt.Errorf("before the kill: %w", err)
	}

	// Input flows while B dies: a third before the kill, the rest after,
	// in small paced batches so that both instances are mid-transaction.
	phase2 := after.input
	third := len(phase2) / 3
	if err := producePaced(ctx, a.cl, phase2[:third], 20, 50*time.Millisecond); err != nil {
		return err
	}
	procB.Kill()
	killed := time.Now()
	a.apps = streamsApps{procA}
	if err := producePaced(ctx, a.cl, phase2[third:], 20, 50*time.Millisecond); err != nil {
		return err
	}

	// A takes every task over once the group has dropped B.
	allTasks := make([]string, partitions)
	for p := range partitions {
		allTasks[p] = fmt.Sprintf("0_%d", p)
	}
	var tasks iqTasks
	err = until(ctx, 3*time.Minute, 500*time.Millisecond, func() (bool, error) {
		if err := a.apps.alive(); err != nil {
			return false, err
		}
		t, err := iqA.tasks(ctx)
		if err != nil {
			return false, nil
		}
		tasks = t
		return t.State == "RUNNING" && slices.Equal(t.Active, allTasks), nil
	})
	if err != nil {
		return fmt.Errorf("after B's kill the survivor does not run all tasks %v: %w (it says %q)", allTasks, err, tasks.raw)
	}
	takeover := time.Since(killed)
	// Dropped by the group's 8 s session, with room for the survivor's
	// next heartbeats and its restore; the broker's default 45 s session
	// would take longer than this.
	if ownNode && takeover > 30*time.Second {
		return fmt.Errorf("the survivor ran all tasks %s after the kill, with the group's %v: the session timeout of the group config was not applied", takeover.Round(time.Second), shortSession)
	}
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, []string{input}, 2*time.Minute); err != nil {
		return err
	}
	if err := a.reader.waitCount(ctx, a.apps, after.want, time.Minute); err != nil {
		return err
	}
	// The survivor answers for every key, from its active tasks alone.
	err = until(ctx, time.Minute, 500*time.Millisecond, func() (bool, error) {
		problem = checkSurvivor(ctx, after.final, iqA)
		return problem == nil, nil
	})
	if err != nil {
		return fmt.Errorf("after the kill: %w (last: %v)", err, problem)
	}
	// Its standbys kept up with B's tasks, so becoming active restored
	// only what B wrote after them, not the changelogs.
	tasks, err = iqA.tasks(ctx)
	if err != nil {
		return err
	}
	restored := tasks.RestoredRecords - tasksA.RestoredRecords
	changelog, err := changelogRecords(ctx, a.cl, a.appID+"-sums-changelog", tasksB.Active)
	if err != nil {
		return err
	}
	if restored >= changelog {
		return fmt.Errorf("the survivor restored %d records taking over B's tasks %v, whose changelog partitions hold %d: its standbys did not spare it the restore", restored, tasksB.Active, changelog)
	}
	groupAfter, err := a.describeGroup(ctx, run, []iqTasks{tasks})
	if err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	got, err := a.finish(ctx, run, []string{input}, after.want)
	if err != nil {
		return err
	}
	e.Notef("A active %v standby %v, B active %v standby %v; %s; B killed, A ran all tasks after %s restoring %d records (B's changelogs: %d); %s; %d updates exact",
		tasksA.Active, tasksA.Standby, tasksB.Active, tasksB.Standby, groupBefore, takeover.Round(time.Second), restored, changelog, groupAfter, len(got))
	return nil
}

// producePaced writes recs in batches of n, pausing between batches: the
// pace of a live input, not a wait for anything.
func producePaced(ctx context.Context, cl *kgo.Client, recs []inputRecord, n int, pause time.Duration) error {
	for len(recs) > 0 {
		k := min(n, len(recs))
		if err := produceInput(ctx, cl, recs[:k]); err != nil {
			return err
		}
		recs = recs[k:]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
	return nil
}

// checkTwoInstances says what is not yet so of two serving instances, or
// nil: both RUNNING with active and standby tasks; their active stores
// partition the keys and hold want; each one's store with standbys holds
// all of want; every key's owner by the metadata is the instance holding
// it.
func checkTwoInstances(ctx context.Context, want map[string]string, iqA, iqB *iqClient, tasksA, tasksB *iqTasks) error {
	var err error
	if *tasksA, err = iqA.tasks(ctx); err != nil {
		return err
	}
	if *tasksB, err = iqB.tasks(ctx); err != nil {
		return err
	}
	for _, t := range []*iqTasks{tasksA, tasksB} {
		if t.State != "RUNNING" || len(t.Active) == 0 || len(t.Standby) == 0 {
			return fmt.Errorf("an instance is not running with both active and standby tasks: %q", t.raw)
		}
	}
	activeA, err := iqA.store(ctx, false)
	if err != nil {
		return err
	}
	activeB, err := iqB.store(ctx, false)
	if err != nil {
		return err
	}
	union := map[string]string{}
	for k, v := range activeA {
		union[k] = v
	}
	for k, v := range activeB {
		if _, dup := union[k]; dup {
			return fmt.Errorf("key %s is in both instances' active stores", k)
		}
		union[k] = v
	}
	if err := sameSums(union, want); err != nil {
		return fmt.Errorf("the active stores of both: %w", err)
	}
	for i, c := range []*iqClient{iqA, iqB} {
		all, err := c.store(ctx, true)
		if err != nil {
			return err
		}
		if err := sameSums(all, want); err != nil {
			return fmt.Errorf("instance %c's store with its standbys: %w", 'A'+i, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		owner, err := iqA.owner(ctx, k)
		if err != nil {
			return err
		}
		holder := iqA.addr
		if _, ok := activeB[k]; ok {
			holder = iqB.addr
		}
		if owner != holder {
			return fmt.Errorf("the metadata says %s holds %s, but %s's active store has it", owner, k, holder)
		}
	}
	return nil
}

// checkSurvivor says what is not yet so of the one instance left, or nil:
// its active store holds every key at want, and the metadata names it for
// each.
func checkSurvivor(ctx context.Context, want map[string]string, iq *iqClient) error {
	got, err := iq.store(ctx, false)
	if err != nil {
		return err
	}
	if err := sameSums(got, want); err != nil {
		return fmt.Errorf("the survivor's active store: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		owner, err := iq.owner(ctx, k)
		if err != nil {
			return err
		}
		if owner != iq.addr {
			return fmt.Errorf("the metadata says %s holds %s, not the survivor %s", owner, k, iq.addr)
		}
	}
	return nil
}

func sameSums(got, want map[string]string) error {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s=%q want %q", k, got[k], want[k]))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("unexpected %s=%q", k, got[k]))
		}
	}
	if len(diffs) > 0 {
		if len(diffs) > 4 {
			diffs = append(diffs[:4], fmt.Sprintf("and %d more", len(diffs)-4))
		}
		return fmt.Errorf("%d keys differ: %s", len(diffs), strings.Join(diffs, ", "))
	}
	return nil
}

// changelogRecords is the end offset of the changelog's partitions of the
// given tasks (0_P is partition P): at most the records a restore from
// scratch would read.
func changelogRecords(ctx context.Context, cl *kgo.Client, topic string, tasks []string) (int64, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var n int64
	for _, t := range tasks {
		var p int32
		if _, err := fmt.Sscanf(t, "0_%d", &p); err != nil {
			return 0, fmt.Errorf("task id %q", t)
		}
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			return 0, fmt.Errorf("no end offset for %s-%d: %v", topic, p, o.Err)
		}
		n += o.Offset
	}
	return n, nil
}

// parseStreamsAssignments reads kafka-streams-groups' ASSIGNMENTS column,
// "ACTIVE: 0:[0,2]; STANDBY: 0:[1,3]; TARGET-ACTIVE: ...;", into sorted
// task ids ("0_2") by kind; a kind without tasks is left out by the tool.
func parseStreamsAssignments(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kind, tasks, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("assignment %q in %q", part, s)
		}
		for _, st := range strings.Fields(tasks) {
			sub, parts, ok := strings.Cut(st, ":")
			if !ok || !strings.HasPrefix(parts, "[") || !strings.HasSuffix(parts, "]") {
				return nil, fmt.Errorf("tasks %q in %q", st, s)
			}
			for _, p := range strings.Split(strings.Trim(parts, "[]"), ",") {
				if p != "" {
					out[kind] = append(out[kind], sub+"_"+strings.TrimSpace(p))
				}
			}
		}
		slices.Sort(out[kind])
	}
	return out, nil
}

// startTwoSums produces the workload's input, starts two instances of the
// sums app, A and B, and waits until both serve interactive queries and
// the app has written the workload's output.
func (a *appEnv) startTwoSums(ctx context.Context, props map[string]string, input string, w sumsWorkload) (procA, procB *Proc, iqA, iqB *iqClient, err error) {
	if err := produceInput(ctx, a.cl, w.input); err != nil {
		return nil, nil, nil, nil, err
	}
	appA, procA, err := a.start(ctx, "app-a", "sums", props)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	appB, procB, err := a.start(ctx, "app-b", "sums", props)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if iqA, err = waitIQAddress(ctx, appA, procA, 90*time.Second); err != nil {
		return nil, nil, nil, nil, err
	}
	if iqB, err = waitIQAddress(ctx, appB, procB, 90*time.Second); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, []string{input}, 2*time.Minute); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := a.reader.waitCount(ctx, a.apps, w.want, time.Minute); err != nil {
		return nil, nil, nil, nil, err
	}
	return procA, procB, iqA, iqB, nil
}

// streamsBrokerDown is how long the killed broker stays down while input
// flows: on a cluster longer than the clients' metadata refreshes after
// a disconnect, so that they move to the new leaders and coordinator
// rather than wait for the old one to come back.
const streamsBrokerDown = 10 * time.Second

// streamsBrokerKill runs the sums app's two instances through a kill -9
// of a broker: the app's group coordinator on a cluster target, the
// scenario's own node on a single-node one.
func streamsBrokerKill(ctx context.Context, e *Env, run appRun) error {
	const partitions = 4
	var coordinatorCl *kgo.Client // set once the app's client exists
	appID := e.Name("app")
	victim := -1
	broker, restore, err := brokerToKill(ctx, e, "the app group's coordinator", func(ctx context.Context) (int, error) {
		id, err := groupCoordinator(ctx, coordinatorCl, appID)
		victim = id
		return id, err
	})
	if err != nil {
		return err
	}
	defer restore()
	input, output := e.Name("deltas"), e.Name("sums")
	a, err := newAppEnv(ctx, e, e.Bootstrap(), map[string]int32{input: partitions, output: partitions}, broker.replicas, output)
	if err != nil {
		return err
	}
	a.appID = appID
	coordinatorCl = a.cl
	base := time.Now().Truncate(time.Second)
	before := newSumsWorkload(input, partitions, 400, 3, base, nil)
	after := newSumsWorkload(input, partitions, 1500, 4, base.Add(time.Second), &before)
	// The internal topics get as many replicas as the inputs (appEnv):
	// with one, a killed broker would take their partitions down with it.
	props := run.props(map[string]string{"app.input": input, "app.output": output, "num.stream.threads": "1"})
	_, _, iqA, iqB, err := a.startTwoSums(ctx, props, input, before)
	if err != nil {
		return err
	}
	tasksBefore, err := waitSplitTasks(ctx, a.apps, partitions, iqA, iqB)
	if err != nil {
		return fmt.Errorf("before the kill: %w", err)
	}
	groupBefore, err := a.describeGroup(ctx, run, tasksBefore)
	if err != nil {
		return fmt.Errorf("before the kill: %w", err)
	}

	// Input flows in small paced batches all along, so that both
	// instances are mid-transaction when the broker dies: a third
	// before the kill, a third while it is down (a single node's
	// clients wait for it), the rest after its restart.
	phase2 := after.input
	third := len(phase2) / 3
	if err := producePaced(ctx, a.cl, phase2[:third], 20, 50*time.Millisecond); err != nil {
		return err
	}
	if err := broker.kill(ctx); err != nil {
		return fmt.Errorf("killing %s: %w", broker.describe, err)
	}
	killed := time.Now()
	produced := make(chan error, 1)
	go func() { produced <- producePaced(ctx, a.cl, phase2[third:2*third], 20, 50*time.Millisecond) }()
	newCoordinator := "-"
	if broker.replicas > 1 {
		// The group has moved while the old coordinator is down.
		err := until(ctx, time.Minute, 500*time.Millisecond, func() (bool, error) {
			id, err := groupCoordinator(ctx, a.cl, a.appID)
			if err != nil {
				return false, err
			}
			newCoordinator = fmt.Sprint(id)
			return id != victim, nil
		})
		if err != nil {
			return fmt.Errorf("the group's coordinator after %s was killed: %w (FindCoordinator says %s)", broker.describe, err, newCoordinator)
		}
	}
	select {
	case <-time.After(time.Until(killed.Add(streamsBrokerDown))):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := broker.restart(ctx); err != nil {
		return fmt.Errorf("restarting %s: %w", broker.describe, err)
	}
	restarted := time.Since(killed)
	if err := <-produced; err != nil {
		return fmt.Errorf("producing while %s was down: %w", broker.describe, err)
	}
	if err := producePaced(ctx, a.cl, phase2[2*third:], 20, 50*time.Millisecond); err != nil {
		return err
	}
	if err := a.apps.alive(); err != nil {
		return fmt.Errorf("after %s was killed: %w", broker.describe, err)
	}
	if err := waitCaughtUp(ctx, a.cl, a.apps, a.appID, []string{input}, 3*time.Minute); err != nil {
		return fmt.Errorf("after %s was killed: %w", broker.describe, err)
	}
	caughtUp := time.Since(killed)
	if err := a.reader.waitCount(ctx, a.apps, after.want, time.Minute); err != nil {
		return err
	}
	tasksAfter, err := waitSplitTasks(ctx, a.apps, partitions, iqA, iqB)
	if err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	groupAfter, err := a.describeGroup(ctx, run, tasksAfter)
	if err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	got, err := a.finish(ctx, run, []string{input}, after.want)
	if err != nil {
		return err
	}
	e.Notef("before: A active %v, B active %v; %s; %s killed, group coordinator then %s, restarted after %s, input caught up %s after the kill; after: A active %v, B active %v; %s; %d updates exact",
		tasksBefore[0].Active, tasksBefore[1].Active, groupBefore, broker.describe, newCoordinator, restarted.Round(time.Second), caughtUp.Round(time.Second),
		tasksAfter[0].Active, tasksAfter[1].Active, groupAfter, len(got))
	return nil
}

// waitSplitTasks waits until every instance is RUNNING and their active
// tasks are the partitions' tasks, each held once.
func waitSplitTasks(ctx context.Context, apps streamsApps, partitions int, iqs ...*iqClient) ([]iqTasks, error) {
	all := make([]string, partitions)
	for p := range partitions {
		all[p] = fmt.Sprintf("0_%d", p)
	}
	tasks := make([]iqTasks, len(iqs))
	var problem string
	err := until(ctx, 2*time.Minute, 500*time.Millisecond, func() (bool, error) {
		if err := apps.alive(); err != nil {
			return false, err
		}
		var held []string
		for i, iq := range iqs {
			t, err := iq.tasks(ctx)
			if err != nil {
				problem = err.Error()
				return false, nil
			}
			if t.State != "RUNNING" {
				problem = fmt.Sprintf("instance %d is %s", i, t.State)
				return false, nil
			}
			tasks[i] = t
			held = append(held, t.Active...)
		}
		slices.Sort(held)
		problem = fmt.Sprintf("the instances run the active tasks %v, want %v each once", held, all)
		return slices.Equal(held, all), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last: %s)", err, problem)
	}
	return tasks, nil
}

// groupCoordinator is the broker FindCoordinator names for group.
func groupCoordinator(ctx context.Context, cl *kgo.Client, group string) (int, error) {
	if cl == nil {
		return 0, errors.New("no client yet")
	}
	res := kadm.NewClient(cl).FindGroupCoordinators(ctx, group)
	c, ok := res[group]
	if !ok {
		return 0, fmt.Errorf("FindCoordinator answered nothing for %s", group)
	}
	if c.Err != nil {
		return 0, c.Err
	}
	return int(c.NodeID), nil
}
