package integration

import (
	"fmt"
	"strings"
	"testing"
)

// The properties files are what both implementations read, so their
// shape is checked without starting anything.
func TestClusterPropertiesSplit3x3(t *testing.T) {
	nodes, err := layOut(Split3x3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Layout: Split3x3, Nodes: nodes}
	var ids []int
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	if fmt.Sprint(ids) != "[101 102 103 1 2 3]" {
		t.Fatalf("node ids %v, want controllers 101-103 then brokers 1-3", ids)
	}
	ctrl := c.properties(c.Node(101))
	brk := c.properties(c.Node(2))
	bootstrap := "controller.quorum.bootstrap.servers=" + c.ControllerBootstrap()
	for _, want := range []string{"process.roles=controller", "node.id=101", bootstrap,
		"listeners=CONTROLLER://" + c.Node(101).ControllerAddr(), "controller.listener.names=CONTROLLER"} {
		if !strings.Contains(ctrl, want+"\n") {
			t.Errorf("controller properties lack %q:\n%s", want, ctrl)
		}
	}
	for _, want := range []string{"process.roles=broker", "node.id=2", bootstrap, "inter.broker.listener.name=INTERNAL",
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		fmt.Sprintf("listeners=INTERNAL://127.0.0.1:%d,EXTERNAL://%s", c.Node(2).InternalPort, c.Node(2).Addr())} {
		if !strings.Contains(brk, want+"\n") {
			t.Errorf("broker properties lack %q:\n%s", want, brk)
		}
	}
	if strings.Contains(ctrl+brk, "controller.quorum.voters") {
		t.Errorf("a dynamic quorum must not name static voters:\n%s\n%s", ctrl, brk)
	}
	if got := strings.Count(c.Bootstrap(), ","); got != 2 {
		t.Errorf("bootstrap %q, want three brokers", c.Bootstrap())
	}
}

func TestClusterPropertiesCombined3(t *testing.T) {
	nodes, err := layOut(Combined3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Layout: Combined3, Nodes: nodes}
	ports := map[int]bool{}
	for _, n := range nodes {
		for _, p := range []int{n.ClientPort, n.ControllerPort} {
			if p == 0 || ports[p] {
				t.Fatalf("node %d: port %d missing or reused", n.ID, p)
			}
			ports[p] = true
		}
	}
	p := c.properties(c.Node(3))
	voters := fmt.Sprintf("controller.quorum.voters=1@%s,2@%s,3@%s", c.Node(1).ControllerAddr(), c.Node(2).ControllerAddr(), c.Node(3).ControllerAddr())
	for _, want := range []string{"process.roles=broker,controller", "node.id=3", voters,
		fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", c.Node(3).Addr(), c.Node(3).ControllerAddr())} {
		if !strings.Contains(p, want+"\n") {
			t.Errorf("properties lack %q:\n%s", want, p)
		}
	}
}

func TestNewTargetClusterNames(t *testing.T) {
	for name, want := range map[string]string{
		"kafka-cluster": "kafka combined3", "gregor-cluster": "gregor combined3",
		"kafka-cluster-split": "kafka split3x3", "gregor-cluster-split": "gregor split3x3",
	} {
		tgt, err := NewTarget(name, nil, TargetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ct, ok := tgt.(*clusterTarget)
		if !ok || ct.flavor+" "+string(ct.layout) != want || tgt.Name() != name {
			t.Errorf("%s: got %T %+v, want %s", name, tgt, tgt, want)
		}
	}
}
