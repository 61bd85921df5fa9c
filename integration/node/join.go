package node

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StartJoiningController formats controller-only node id with
// --no-initial-controllers into the cluster and dynamic quorum of peer (a
// controller of StartSplit) and starts it: it follows the quorum as an
// observer until `kafka-metadata-quorum add-controller` makes it a voter.
func StartJoiningController(t testing.TB, peer *Node, id int32) *Node {
	t.Helper()
	n := newNode(t, id, "controller", peer.Overrides)
	n.Quorum = peer.Quorum
	format(t, n, ClusterID(t, peer), "--no-initial-controllers")
	launchAll(t, []*Node{n})
	return n
}

// ClusterID is the cluster id in n's meta.properties.
func ClusterID(t testing.TB, n *Node) string {
	t.Helper()
	return MetaProperty(t, n, "cluster.id")
}

// MetaProperty is key's value in n's meta.properties.
func MetaProperty(t testing.TB, n *Node, key string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(n.Dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k == key {
			return v
		}
	}
	t.Fatalf("no %s in %s/meta.properties", key, n.Dir)
	return ""
}

// WipeBroker replaces the stopped broker-only node n's data dir with an
// empty one formatted into clusterID, as an operator does for a broker
// whose disk was lost; Restart then starts it with nothing of its own.
func WipeBroker(t testing.TB, n *Node, clusterID string) {
	t.Helper()
	if err := os.RemoveAll(n.Dir); err != nil {
		t.Fatal(err)
	}
	format(t, n, clusterID, "--no-initial-controllers")
}
