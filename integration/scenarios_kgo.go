package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The franz-go kgo integration suite, unmodified, from the module cache.
// It reads KGO_SEEDS, KGO_TEST_RF and KGO_TEST_RECORDS, and for its SASL
// tests KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM and KGO_TEST_OAUTH_SEEDS: the
// scenario starts a single node of the target's flavor beside the target
// with a SCRAM-SHA-256 listener (its user made with --add-scram) and an
// OAUTHBEARER listener (Kafka's default, unsecured, validator) for them.
const (
	kgoPackage      = "github.com/twmb/franz-go/pkg/kgo"
	kgoRecords      = "50000"
	kgoTestTimeout  = 12 * time.Minute
	kgoScenarioTime = 15 * time.Minute
)

func kgoScenarios() []Scenario {
	return []Scenario{{
		Name:    "kgo/suite",
		Doc:     "franz-go " + FranzGoVersion + " pkg/kgo tests (unmodified, KGO_TEST_RF=1, or 3 on a cluster of 3 brokers or more); every test in integration/kgo-ALLOWLIST must pass",
		Timeout: kgoScenarioTime,
		Run:     runKgoSuite,
	}}
}

// kgoReplicationFactor is KGO_TEST_RF for a target: 3 on a cluster of at
// least three brokers (the RF=3 run), 1 on a single node.
func kgoReplicationFactor(t Topology) string {
	if len(t.Brokers) >= 3 {
		return "3"
	}
	return "1"
}

// kgoOutcome is one top-level test's result in the suite.
type kgoOutcome struct {
	Test    string  `json:"test"`
	Action  string  `json:"action"` // pass, fail, skip, or run (never finished)
	Elapsed float64 `json:"elapsed"`
	Skip    string  `json:"skip_reason,omitempty"`
}

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action  string  `json:"Action"`
	Test    string  `json:"Test"`
	Elapsed float64 `json:"Elapsed"`
	Output  string  `json:"Output"`
}

// parseGoTestJSON returns the outcome of every top-level test, sorted by
// name. Subtests fold into their parent (the parent fails if one fails).
// A test that started but never reported is "run": the binary timed out
// or crashed while it ran.
func parseGoTestJSON(out string) []kgoOutcome {
	res := map[string]*kgoOutcome{}
	lastOutput := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		o := res[ev.Test]
		if o == nil {
			o = &kgoOutcome{Test: ev.Test, Action: "run"}
			res[ev.Test] = o
		}
		switch ev.Action {
		case "output":
			if l := strings.TrimSpace(ev.Output); l != "" && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "===") {
				lastOutput[ev.Test] = l
			}
		case "pass", "fail", "skip":
			o.Action, o.Elapsed = ev.Action, ev.Elapsed
			if ev.Action == "skip" {
				o.Skip = lastOutput[ev.Test]
			}
		}
	}
	list := make([]kgoOutcome, 0, len(res))
	for _, o := range res {
		list = append(list, *o)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Test < list[j].Test })
	return list
}

// checkAllowlist fails when an allowlisted test did not pass (including
// one the suite no longer has).
func checkAllowlist(outcomes []kgoOutcome, allow []string) error {
	by := map[string]kgoOutcome{}
	for _, o := range outcomes {
		by[o.Test] = o
	}
	var bad []string
	for _, name := range allow {
		o, ok := by[name]
		switch {
		case !ok:
			bad = append(bad, name+" (not run)")
		case o.Action != "pass":
			bad = append(bad, name+" ("+o.Action+")")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d allowlisted kgo tests did not pass: %s", len(bad), len(allow), strings.Join(firstN(bad, 12), ", "))
	}
	return nil
}

func runKgoSuite(ctx context.Context, e *Env) error {
	dir, err := e.Tools.KgoModule(ctx)
	if err != nil {
		return err
	}
	allow, err := ReadNameList(filepath.Join(e.Tools.Root, "integration", "kgo-ALLOWLIST"))
	if err != nil {
		return err
	}
	// Tests that hang against a target lacking a feature cannot run at all:
	// one hung test holds the whole binary until its timeout. They are
	// listed in kgo-SKIP, each with its cause in FINDINGS.md.
	skip, err := ReadNameList(filepath.Join(e.Tools.Root, "integration", "kgo-SKIP"))
	if err != nil {
		return err
	}
	args := []string{"test", "-json", "-count=1", "-timeout", kgoTestTimeout.String()}
	if len(skip) > 0 {
		args = append(args, "-skip", "^("+strings.Join(skip, "|")+")$")
	}
	saslEnv, err := kgoSASLNode(ctx, e)
	if err != nil {
		return fmt.Errorf("starting the node of the SASL tests: %w", err)
	}
	out, runErr := e.Exec(ctx, Cmd{
		Name: "go",
		Args: append(args, kgoPackage),
		Env: append([]string{"KGO_SEEDS=" + e.Bootstrap(), "KGO_TEST_RF=" + kgoReplicationFactor(e.Target.Topology()), "KGO_TEST_RECORDS=" + kgoRecords,
			"KGO_LOG_LEVEL=none", "GOFLAGS=-mod=mod"}, saslEnv...),
		Dir:     dir,
		Timeout: kgoTestTimeout + time.Minute,
	})
	// The raw stream is kept for whoever reads FINDINGS.md next.
	_ = os.WriteFile(filepath.Join(e.Dir, "kgo-test.json"), []byte(out.Stdout), 0o644)
	outcomes := parseGoTestJSON(out.Stdout)
	if js, err := json.MarshalIndent(outcomes, "", " "); err == nil {
		_ = os.WriteFile(filepath.Join(e.Dir, "kgo-outcomes.json"), js, 0o644)
	}
	if len(outcomes) == 0 {
		if runErr != nil {
			return fmt.Errorf("kgo suite produced no test results: %w", runErr)
		}
		return fmt.Errorf("kgo suite produced no test results")
	}
	counts := map[string]int{}
	for _, o := range outcomes {
		counts[o.Action]++
	}
	// Tests that never finished usually mean the broker hung. A Go broker
	// prints every goroutine's stack on SIGQUIT (and exits; the runner
	// restarts it), which is what whoever debugs the hang needs.
	if counts["run"] > 0 && e.Target.Name() == "gregor" && e.Target.Alive() == nil {
		if pid := e.Target.Pid(); pid > 0 && syscall.Kill(pid, syscall.SIGQUIT) == nil {
			// The dump is whole once the process has exited.
			deadline := time.Now().Add(10 * time.Second)
			for e.Target.Alive() == nil && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			e.Log.Warn("kgo tests hung; sent SIGQUIT to gregor for a goroutine dump in its broker.log", "pid", pid, "exited", e.Target.Alive() != nil)
		}
	}
	e.Notef("%d tests: %d pass, %d fail, %d skip, %d unfinished; allowlist %d", len(outcomes), counts["pass"], counts["fail"], counts["skip"], counts["run"], len(allow))
	return checkAllowlist(outcomes, allow)
}

// kgoSASLNode starts the node the suite's SASL tests authenticate to and
// returns their environment: TestSCRAMAuth and TestSCRAMAuthBadCredentials
// use the SCRAM listener as user kgo, TestOAuthAuth the OAUTHBEARER one
// with unsecured tokens. An external target runs them without (they skip).
func kgoSASLNode(ctx context.Context, e *Env) ([]string, error) {
	if FlavorOf(e.Target.Name()) == "" {
		return nil, nil
	}
	n, err := e.StartNode(ctx, NodeSpec{
		Listeners: []NodeListener{{Name: "SCRAM", Protocol: "SASL_PLAINTEXT"}, {Name: "OAUTH", Protocol: "SASL_PLAINTEXT"}},
		Properties: map[string]string{
			"listener.name.scram.sasl.enabled.mechanisms":        "SCRAM-SHA-256",
			"listener.name.scram.scram-sha-256.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required;`,
			"listener.name.oauth.sasl.enabled.mechanisms":        "OAUTHBEARER",
			"listener.name.oauth.oauthbearer.sasl.jaas.config":   `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`,
		},
		FormatFlags: []string{"--add-scram", "SCRAM-SHA-256=[name=kgo,password=kgo-secret]"},
	})
	if err != nil {
		return nil, err
	}
	return []string{"KGO_TEST_SCRAM_SEEDS=" + n.Addr("SCRAM"), "KGO_TEST_SCRAM=kgo:kgo-secret:256", "KGO_TEST_OAUTH_SEEDS=" + n.Addr("OAUTH")}, nil
}
