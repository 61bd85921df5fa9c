package broker

import (
	"context"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/quota"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMutationQuotaByAPIVersion: a request gets a controller mutation
// quota, in its context, only when its API mutates partitions; strict
// (refusing once the bucket is below zero) from the version whose answers
// carry THROTTLING_QUOTA_EXCEEDED, permissive before it.
func TestMutationQuotaByAPIVersion(t *testing.T) {
	q := quota.New(quota.DefaultOptions(), time.Now)
	// The default client id's quota: each case's client has its own
	// bucket of 2 * 11 * 1 = 22 permits.
	q.Update(map[metadata.QuotaEntity]map[string]float64{
		{ClientID: metadata.QuotaDefault()}: {metadata.QuotaControllerMutationRate: 2},
	})
	for _, tc := range []struct {
		client       string
		key, version int16
		quota        bool
		strict       bool
	}{
		{"create-v6", int16(kmsg.CreateTopics), 6, true, true},
		{"create-v5", int16(kmsg.CreateTopics), 5, true, false},
		{"partitions-v3", int16(kmsg.CreatePartitions), 3, true, true},
		{"delete-v4", int16(kmsg.DeleteTopics), 4, true, false},
		{"produce", int16(kmsg.Produce), 9, false, false},
	} {
		ctx, mq := withMutationQuota(context.Background(), q, tc.key, tc.version, "u", tc.client)
		if (mq != nil) != tc.quota {
			t.Fatalf("%s: quota %v, want %v", tc.client, mq != nil, tc.quota)
		}
		if !tc.quota {
			if metadata.MutationQuotaOf(ctx) != nil {
				t.Fatalf("%s: the context carries a quota", tc.client)
			}
			continue
		}
		if metadata.MutationQuotaOf(ctx) != metadata.MutationQuota(mq) {
			t.Fatalf("%s: the context does not carry the request's quota", tc.client)
		}
		// The whole bucket and one more are taken; then only a
		// permissive quota takes more.
		if !mq.Record(23) {
			t.Fatalf("%s: the burst was refused", tc.client)
		}
		if took := mq.Record(1); took == tc.strict {
			t.Fatalf("%s: below zero, taken %v; want strict %v", tc.client, took, tc.strict)
		}
	}
}
