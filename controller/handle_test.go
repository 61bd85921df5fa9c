package controller

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/vfs"
)

// Handle dispatches the requests a broker sends to the active controller
// and answers the others (and a stopped controller) with an error.
func TestHandle(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	registerBroker(t, c, 1)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "handled", 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := c.Handle(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if ct, ok := resp.(*kmsg.CreateTopicsResponse); !ok || len(ct.Topics) != 1 || ct.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics through Handle: %+v", resp)
	}
	if c.Image().Topic("handled") == nil {
		t.Fatal("the topic is not in the image")
	}
	if _, err := c.Handle(ctxT(t), kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("Metadata is not the controller's to answer")
	}
	// No answer (a stopping controller's nil) is ErrNoAnswer, not a
	// typed nil inside a non-nil interface.
	if resp, err := answered((*kmsg.DeleteTopicsResponse)(nil)); resp != nil || !errors.Is(err, metadata.ErrNoAnswer) {
		t.Fatalf("no answer: %v %v", resp, err)
	}
}
