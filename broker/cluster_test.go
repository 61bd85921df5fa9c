package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// operationsIn lists the ACL operations set in a Kafka authorized
// operations bitfield.
func operationsIn(bits int32) []kmsg.ACLOperation {
	var ops []kmsg.ACLOperation
	for code := 0; code < 32; code++ {
		if bits&(1<<code) != 0 {
			ops = append(ops, kmsg.ACLOperation(code))
		}
	}
	return ops
}

// Without an authorizer Kafka reports every operation a cluster resource
// supports (AclEntry.supportedOperations(CLUSTER)): seven of them, WRITE
// not among them. DescribeCluster and Metadata v8-v10 share the set.
func TestClusterAuthorizedOperationsAreKafkas(t *testing.T) {
	want := []kmsg.ACLOperation{
		kmsg.ACLOperationCreate,
		kmsg.ACLOperationAlter,
		kmsg.ACLOperationDescribe,
		kmsg.ACLOperationClusterAction,
		kmsg.ACLOperationDescribeConfigs,
		kmsg.ACLOperationAlterConfigs,
		kmsg.ACLOperationIdempotentWrite,
	}
	n := startTestNode(t, nil)
	c := dialRaw(t, n.addr)
	corr := int32(0)

	for _, include := range []bool{true, false} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(0)
		req.IncludeClusterAuthorizedOperations = include
		corr++
		c.send(req, corr)
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.SetVersion(0)
		c.recv(resp)
		if !include {
			if resp.ClusterAuthorizedOperations != operationsOmitted {
				t.Errorf("DescribeCluster without the flag reports %d, want %d", resp.ClusterAuthorizedOperations, operationsOmitted)
			}
			continue
		}
		if got := operationsIn(resp.ClusterAuthorizedOperations); !slices.Equal(got, want) {
			t.Errorf("DescribeCluster cluster operations %v, want %v", got, want)
		}
	}

	for v := int16(8); v <= 10; v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		req.Topics = []kmsg.MetadataRequestTopic{}
		req.IncludeClusterAuthorizedOperations = true
		corr++
		c.send(req, corr)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(v)
		c.recv(resp)
		if got := operationsIn(resp.AuthorizedOperations); !slices.Equal(got, want) {
			t.Errorf("Metadata v%d cluster operations %v, want %v", v, got, want)
		}
	}
}
