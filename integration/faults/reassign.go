package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	// A broker cut off by a network nemesis injected just before may get
	// the request and time out forwarding it: it is asked again (the
	// client may pick another broker) until the deadline.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(rctx, 10*time.Second)
		resp, err := f.Admin.AlterPartitionAssignments(actx, kadm.AlterPartitionAssignmentsReq{f.Topic: {p.ID: target}})
		acancel()
		if err == nil {
			err = resp.Error()
		}
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
// leader, until ctx ends.
func activeController(ctx context.Context, f *Faults) (int, error) {
	var last error
	for {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, f.Client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
			err = errors.New("the answer does not have the metadata partition alone")
		}
		if err == nil {
			qp := resp.Topics[0].Partitions[0]
			if err = kerr.ErrorForCode(qp.ErrorCode); err == nil {
				if qp.LeaderID >= 0 && f.Cluster.Node(int(qp.LeaderID)) != nil {
					return int(qp.LeaderID), nil
				}
				err = fmt.Errorf("leader %d is no node of the cluster", qp.LeaderID)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("finding the active controller (DescribeQuorum): %w", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
