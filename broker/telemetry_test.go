package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientTelemetryOverTheWire: a client-metrics subscription set with
// IncrementalAlterConfigs (as kafka-client-metrics.sh does), described
// with DescribeConfigs, reaches GetTelemetrySubscriptions, matched on the
// software the client named in ApiVersions; a push with its subscription
// is taken and one with another is UNKNOWN_SUBSCRIPTION_ID; bad configs
// get Kafka's codes.
func TestClientTelemetryOverTheWire(t *testing.T) {
	n := startGroupTestNode(t, 1)
	c := n.dial(t)
	alter := func(name string, cfgs map[string]string) kmsg.IncrementalAlterConfigsResponseResource {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
		for _, k := range []string{"metrics", "interval.ms", "match"} {
			if v, ok := cfgs[k]; ok {
				r.Configs = append(r.Configs, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: k, Value: kmsg.StringPtr(v)})
			}
		}
		req.Resources = append(req.Resources, r)
		return c.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	}
	if r := alter("bad", map[string]string{"interval.ms": "5"}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("interval 5: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r := alter("bad", map[string]string{"match": "rack=x"}); r.ErrorCode != kerr.InvalidConfig.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Illegal client matching pattern: rack=x" {
		t.Errorf("bad match: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r := alter("java", map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_software_name=gregor-test"}); r.ErrorCode != 0 {
		t.Fatalf("alter: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}

	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.Version = 4
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "java"
	describe.Resources = append(describe.Resources, dr)
	res := c.roundTrip(describe).(*kmsg.DescribeConfigsResponse).Resources[0]
	var got []string
	for _, cfg := range res.Configs {
		got = append(got, cfg.Name+"="+*cfg.Value+"/"+cfg.Source.String())
	}
	if want := []string{"interval.ms=1000/CLIENT_METRICS_CONFIG", "match=client_software_name=gregor-test/CLIENT_METRICS_CONFIG", "metrics=org.apache.kafka.producer./CLIENT_METRICS_CONFIG"}; res.ErrorCode != 0 || !slices.Equal(got, want) {
		t.Errorf("describe: %v %v, want %v", kerr.ErrorForCode(res.ErrorCode), got, want)
	}

	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "gregor-test", "1.0"
	c.roundTrip(av)
	var sub *kmsg.GetTelemetrySubscriptionsResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		sub = c.roundTrip(kmsg.NewPtrGetTelemetrySubscriptionsRequest()).(*kmsg.GetTelemetrySubscriptionsResponse)
		if sub.ErrorCode == 0 && len(sub.RequestedMetrics) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the subscription reaches the image
	}
	if sub.ErrorCode != 0 || !slices.Equal(sub.RequestedMetrics, []string{"org.apache.kafka.producer."}) || sub.PushIntervalMillis != 1000 || sub.TelemetryMaxBytes != 1<<20 {
		t.Fatalf("subscription: %v %+v", kerr.ErrorForCode(sub.ErrorCode), sub)
	}
	p := kmsg.NewPtrPushTelemetryRequest()
	p.ClientInstanceID, p.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID+1
	if r := c.roundTrip(p).(*kmsg.PushTelemetryResponse); r.ErrorCode != kerr.UnknownSubscriptionID.Code {
		t.Errorf("push with another subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	time.Sleep(time.Second)
	p.SubscriptionID = sub.SubscriptionID
	if r := c.roundTrip(p).(*kmsg.PushTelemetryResponse); r.ErrorCode != 0 {
		t.Errorf("push: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
