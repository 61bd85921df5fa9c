package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A BROKER resource naming another broker, or whose configs the broker's
// own check refuses, is answered by the broker with INVALID_REQUEST; the
// other resources of the request still reach the controller, and the
// answers keep the request's order.
func TestBrokerConfigsCheckedBeforeForwarding(t *testing.T) {
	var seen []map[string]string
	n := startTestNodeWithOptions(t, nil, map[string]int16{"group.version": 1}, nil, nil, func(o *Options) {
		o.ValidateBrokerConfigs = func(next map[string]string) error {
			seen = append(seen, next)
			if next["listener.name.ssl.ssl.keystore.location"] == "/bad" {
				return errors.New("Validation of dynamic config update of SSLFactory failed: no")
			}
			return nil
		}
	})
	createTopic(t, n, "cfg", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	set := func(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
		return c
	}
	res := func(typ kmsg.ConfigResourceType, name string, cfgs ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = typ, name, cfgs
		return r
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		res(kmsg.ConfigResourceTypeBroker, "2", set("log.cleaner.threads", "2")),
		res(kmsg.ConfigResourceTypeTopic, "cfg", set("retention.ms", "1234")),
		res(kmsg.ConfigResourceTypeBroker, "1", set("listener.name.ssl.ssl.keystore.location", "/bad")),
		res(kmsg.ConfigResourceTypeBroker, "x", set("log.cleaner.threads", "2")),
	}
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		code int16
		msg  string
	}{
		{"2", kerr.InvalidRequest.Code, "Unexpected broker id, expected 1, but received 2"},
		{"cfg", 0, ""},
		{"1", kerr.InvalidRequest.Code, "Invalid value Validation of dynamic config update of SSLFactory failed: no for configuration Invalid dynamic configuration"},
		{"x", kerr.InvalidRequest.Code, "Node id must be an integer, but it is: x"},
	}
	if len(resp.Resources) != len(want) {
		t.Fatalf("%d answers, want %d", len(resp.Resources), len(want))
	}
	for i, w := range want {
		r := resp.Resources[i]
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if r.ResourceName != w.name || r.ErrorCode != w.code || w.msg != "" && msg != w.msg {
			t.Errorf("answer %d: %s error %d %q; want %s error %d %q", i, r.ResourceName, r.ErrorCode, msg, w.name, w.code, w.msg)
		}
	}
	if v := n.ctrl.Image().Configs[topicResource("cfg")]["retention.ms"]; v != "1234" {
		t.Errorf("the topic resource was not applied: retention.ms=%q", v)
	}
	// A good change for this broker is checked with the configs it would
	// lead to, then applied.
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res(kmsg.ConfigResourceTypeBroker, "1", set("listener.name.ssl.ssl.keystore.location", "/good"))}
	resp, err = req.RequestWith(ctx, cl.Broker(1))
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("a good change: %v %+v", err, resp.Resources)
	}
	if last := seen[len(seen)-1]; last["listener.name.ssl.ssl.keystore.location"] != "/good" {
		t.Errorf("the check saw %v", last)
	}
}

func TestApplyIncremental(t *testing.T) {
	op := func(name string, o kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, o, v
		return c
	}
	got := applyIncremental(map[string]string{"a": "1", "l": "x,y", "gone": "z"}, []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		op("a", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("2")),
		op("gone", kmsg.IncrementalAlterConfigOpDelete, nil),
		op("l", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("z,x")),
		op("l", kmsg.IncrementalAlterConfigOpSubtract, kmsg.StringPtr("y")),
		op("new", kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("q")),
	})
	want := map[string]string{"a": "2", "l": "x,z", "new": "q"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
