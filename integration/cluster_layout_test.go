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
	giveHosts(nodes)
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
		fmt.Sprintf("listeners=INTERNAL://%s:%d,EXTERNAL://%s", c.Node(2).Host, c.Node(2).InternalPort, c.Node(2).Addr())} {
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
	giveHosts(nodes)
	c := &Cluster{Layout: Combined3, Nodes: nodes}
	addrs := map[string]bool{}
	for _, n := range nodes {
		if n.ClientPort == 0 || n.ControllerPort == 0 || n.ClientPort == n.ControllerPort {
			t.Fatalf("node %d: ports %d and %d, want two distinct ones", n.ID, n.ClientPort, n.ControllerPort)
		}
		for _, a := range []string{n.Addr(), n.ControllerAddr()} {
			if addrs[a] {
				t.Fatalf("node %d: address %s reused", n.ID, a)
			}
			addrs[a] = true
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

// giveHosts gives nodes the distinct addresses StartClusterWith would
// claim for them (these are only written into properties, never bound).
func giveHosts(nodes []*ClusterNode) {
	for i, n := range nodes {
		n.Host = fmt.Sprintf("127.100.200.%d", i+1)
	}
}
