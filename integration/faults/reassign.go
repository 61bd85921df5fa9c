package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KillControllerReassigning starts a reassignment of a random partition
// of f.Topic (one replica moved to a broker outside its replicas when
// there is one, else its replicas in another order, which changes the
// preferred leader) and kills the active controller with kill -9 while
// the reassignment is under way; Heal restarts the controller. The
// reassignment completing is what the schedule's settle waits for.
func KillControllerReassigning(f *Faults, name string) Nemesis {
	return &nodeFault{f: f, name: name, pick: reassignAndFindController, verb: "kill -9",
		inject: func(_ context.Context, id int) error { return f.Cluster.Kill(id) },
		heal:   func(ctx context.Context, id int) error { return f.Cluster.Restart(ctx, id) }}
}

// reassignAndFindController is the picker: it starts the reassignment
// and returns the active controller.
func reassignAndFindController(ctx context.Context, f *Faults) (int, string, error) {
	if f.Client == nil {
		return 0, "", errors.New("reassignment nemesis: Faults.Client is not set")
	}
	p, err := f.randomPartition(ctx, func(p Partition) bool { return p.Leader >= 0 && len(p.ISR) == len(p.Replicas) })
	if err != nil {
		return 0, "", err
	}
	target := newReplicas(f, p)
	// Asked of the active controller's own broker, or of a broker whose
	// links to it are whole: a broker cut off by a network nemesis
	// injected just before could take the request and time out
	// forwarding it (kgo sends admin requests to the Metadata's
	// ControllerId, which may be that broker, again and again).
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := reassign(rctx, f, p, target)
		if err == nil {
			break
		}
		if rctx.Err() != nil {
			return 0, "", fmt.Errorf("reassigning partition %d from %v to %v: %w", p.ID, p.Replicas, target, err)
		}
		select {
		case <-rctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	id, err := activeController(rctx, f)
	if err != nil {
		return 0, "", err
	}
	return id, fmt.Sprintf("the active controller, right after partition %d was reassigned from %v to %v", p.ID, p.Replicas, target), nil
}

// reassign asks for partition p of f.Topic to move to target, through a
// broker that reaches the active controller.
func reassign(ctx context.Context, f *Faults, p Partition, target []int32) error {
	ctrl, err := activeController(ctx, f)
	if err != nil {
		return err
	}
	via, err := f.brokerReaching(ctrl)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = f.Topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = p.ID, target
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(actx, f.Client.Broker(via))
	if err != nil {
		return fmt.Errorf("asking broker %d: %w", via, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("broker %d answered %w", via, err)
	}
	for _, t := range resp.Topics {
		for _, tp := range t.Partitions {
			if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
				return fmt.Errorf("broker %d answered %w for partition %d", via, err, tp.Partition)
			}
		}
	}
	return nil
}

// brokerReaching is a broker that reaches controller ctrl: its own
// broker on a combined node, else one with no dropped link to or from it.
func (f *Faults) brokerReaching(ctrl int) (int, error) {
	if n := f.Cluster.Node(ctrl); n != nil && n.IsBroker() {
		return ctrl, nil
	}
	var dropped []Link
	if f.Net != nil {
		dropped = f.Net.Dropped()
	}
	for _, b := range f.Cluster.Brokers() {
		if !slices.Contains(dropped, Link{b.ID, ctrl}) && !slices.Contains(dropped, Link{ctrl, b.ID}) {
			return b.ID, nil
		}
	}
	return 0, fmt.Errorf("no broker reaches the active controller %d (dropped links %v)", ctrl, dropped)
}

func newReplicas(f *Faults, p Partition) []int32 {
	var outside []int32
	for _, b := range f.Cluster.Brokers() {
		if !slices.Contains(p.Replicas, int32(b.ID)) {
			outside = append(outside, int32(b.ID))
		}
	}
	target := slices.Clone(p.Replicas)
	if len(outside) > 0 {
		target[f.intN(len(target))] = outside[f.intN(len(outside))]
		return target
	}
	return append(target[1:], target[0])
}

// activeController asks DescribeQuorum of the metadata partition for its
// leader, of each broker in turn (one cut off from the controllers by a
// network nemesis cannot answer: it times out forwarding), until ctx
// ends.
func activeController(ctx context.Context, f *Faults) (int, error) {
	var last error
	for {
		for _, b := range f.Cluster.Brokers() {
			id, err := describeQuorumLeader(ctx, f, b.ID)
			if err == nil {
				return id, nil
			}
			last = fmt.Errorf("broker %d: %w", b.ID, err)
			if ctx.Err() != nil {
				return 0, fmt.Errorf("finding the active controller (DescribeQuorum): %w", last)
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("finding the active controller (DescribeQuorum): %w", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describeQuorumLeader asks broker via for the metadata quorum's leader.
func describeQuorumLeader(ctx context.Context, f *Faults, via int) (int, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, f.Client.Broker(via))
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("the answer does not have the metadata partition alone")
	}
	qp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(qp.ErrorCode); err != nil {
		return 0, err
	}
	if qp.LeaderID < 0 || f.Cluster.Node(int(qp.LeaderID)) == nil {
		return 0, fmt.Errorf("leader %d is no node of the cluster", qp.LeaderID)
	}
	return int(qp.LeaderID), nil
}
