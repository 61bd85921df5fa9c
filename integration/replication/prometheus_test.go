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
// returns a PromQL query function over its HTTP API: the value of an
// expression that gives one sample, false while it gives none.
func startPrometheus(ctx context.Context, t *testing.T, targets []string) func(expr string) (float64, bool) {
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
	return func(expr string) (float64, bool) {
		resp, err := c.Get("http://" + listen + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var answer struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.Status != "success" || len(answer.Data.Result) != 1 {
			return 0, false
		}
		s, _ := answer.Data.Result[0].Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
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
	query := startPrometheus(ctx, t, targets)
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
}
