package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPartitionReassignmentsThroughTheBroker: kadm's reassignment calls
// reach the controller through the client listener (forwarded), and an
// ongoing move is listed until it is cancelled.
func TestPartitionReassignmentsThroughTheBroker(t *testing.T) {
	n := startTestNode(t, nil)
	registerFakeBroker(t, n.ctrl, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "moving"); err != nil {
		t.Fatal(err)
	}
	from := n.ctrl.Image().Topic("moving").Partitions.At(0).Replicas[0]
	to := 3 - from

	altered, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"moving": {0: {to}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := altered["moving"][0]; r.Err != nil {
		t.Fatalf("reassign: %v", r.Err)
	}
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moving": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := listed["moving"][0]
	if !slices.Equal(got.Replicas, []int32{to, from}) || !slices.Equal(got.AddingReplicas, []int32{to}) || !slices.Equal(got.RemovingReplicas, []int32{from}) {
		t.Fatalf("listed %+v", listed)
	}

	// Null topics list every reassignment (kadm never sends null).
	all, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
	if err != nil || all.ErrorCode != 0 || len(all.Topics) != 1 || all.Topics[0].Topic != "moving" {
		t.Fatalf("listing all: %+v %v", all, err)
	}

	// Cancel it, then there is nothing to cancel.
	cancelReq := kadm.AlterPartitionAssignmentsReq{}
	cancelReq.CancelAssign("moving", 0)
	cancelled, err := adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if r := cancelled["moving"][0]; r.Err != nil {
		t.Fatalf("cancel: %v", r.Err)
	}
	if p := *n.ctrl.Image().Topic("moving").Partitions.At(0); !slices.Equal(p.Replicas, []int32{from}) || p.Reassigning() {
		t.Fatalf("after cancelling: %+v", p)
	}
	cancelled, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if r := cancelled["moving"][0]; r.Err != kerr.NoReassignmentInProgress {
		t.Fatalf("second cancel: %v", r.Err)
	}
	all, err = kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl)
	if err != nil || all.ErrorCode != 0 || len(all.Topics) != 0 {
		t.Fatalf("listed after cancelling: %+v %v", all, err)
	}
}
