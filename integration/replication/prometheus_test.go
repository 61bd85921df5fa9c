package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startPrometheus starts Debian's Prometheus (installed when missing) on a
// loopback address of the test's own, scraping targets every second, and
// returns PromQL over its HTTP API: query is the value of an expression
// that gives one sample (false while it gives none), check whether
// Prometheus evaluates an expression at all.
func startPrometheus(ctx context.Context, t *testing.T, targets []string) (query func(expr string) (float64, bool), check func(expr string) error) {
	t.Helper()
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := integration.NewTools(root).AptBinary(ctx, "prometheus", "prometheus")
	if err != nil {
		t.Fatalf("installing Prometheus: %v", err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = strconv.Quote(a)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"+
		"scrape_configs:\n  - job_name: gregor\n    static_configs:\n      - targets: [%s]\n", strings.Join(quoted, ", "))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	host := node.Host(t)
	listen := net.JoinHostPort(host.IP, strconv.Itoa(integration.FirstExtraPort))
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.SysProcAttr = integration.ChildProcAttr()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Prometheus: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("Prometheus' output:\n%s", out.String())
		}
	})
	c := &http.Client{Timeout: 2 * time.Second}
	type answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	ask := func(expr string) (answer, error) {
		var a answer
		resp, err := c.Get("http://" + listen + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return a, err
		}
		defer resp.Body.Close()
		err = json.NewDecoder(resp.Body).Decode(&a)
		return a, err
	}
	query = func(expr string) (float64, bool) {
		a, err := ask(expr)
		if err != nil || a.Status != "success" || len(a.Data.Result) != 1 {
			return 0, false
		}
		s, _ := a.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	check = func(expr string) error {
		a, err := ask(expr)
		if err == nil && a.Status != "success" {
			err = fmt.Errorf("%s: %s", a.Status, a.Error)
		}
		return err
	}
	return query, check
}

// TestPrometheusScrapesTheCluster: a real Prometheus scrapes a 3-node
// cluster, and the expressions operators alert on answer what happened:
// nothing under-replicated and one active controller before, every
// partition under-replicated and a target down while a node is killed,
// and all clear once it is back.
func TestPrometheusScrapesTheCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	targets := make([]string, len(nodes))
	for i, n := range nodes {
		targets[i] = n.DebugAddr
	}
	query, check := startPrometheus(ctx, t, targets)
	cl := node.NewClient(t, node.Addrs(nodes), kgo.RequiredAcks(kgo.AllISRAcks()))
	const topic = "scraped"
	createReplicated(ctx, t, kadm.NewClient(cl), topic, 4)
	produceValues(ctx, t, cl, topic, "a-", 100)

	const (
		underReplicated = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
		offline         = "max(kafka_controller_kafkacontroller_offlinepartitionscount)"
		activeCtrl      = "sum(kafka_controller_kafkacontroller_activecontrollercount)"
		targetsUp       = `sum(up{job="gregor"})`
		messagesIn      = `sum(kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"})`
	)
	answers := func(phase string, want map[string]float64) {
		t.Helper()
		got := map[string]float64{}
		took := node.WaitFor(t, 60*time.Second, phase+": "+fmt.Sprint(want), func() bool {
			for expr, w := range want {
				v, ok := query(expr)
				got[expr] = v
				if !ok || v != w {
					return false
				}
			}
			return true
		})
		t.Logf("%s (after %s): %v", phase, took.Round(time.Millisecond), got)
	}
	answers("before", map[string]float64{underReplicated: 0, offline: 0, activeCtrl: 1, targetsUp: 3, messagesIn: 100})

	var victim *node.Node
	for _, n := range nodes {
		if m, err := n.Metrics(); err == nil && m["kafka_controller_kafkacontroller_activecontrollercount"] == 0 {
			victim = n
			break
		}
	}
	victim.Kill()
	t.Logf("killed node %d", victim.ID)
	answers("during", map[string]float64{underReplicated: 4, offline: 0, activeCtrl: 1, targetsUp: 2})

	victim.Restart()
	answers("after the rejoin", map[string]float64{underReplicated: 0, offline: 0, activeCtrl: 1, targetsUp: 3})

	// Every query of the dashboard in docs/ is PromQL that Prometheus
	// evaluates over what the nodes serve.
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			if err := check(target.Expr); err != nil {
				t.Errorf("dashboard panel %q: %s: %v", p.Title, target.Expr, err)
			}
		}
	}
}
