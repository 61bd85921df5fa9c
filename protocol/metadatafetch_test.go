package protocol

import (
	"reflect"
	"testing"
)

// TestMetadataFetchV1RoundTrip: the v1 fields of a joining controller's
// announcement and of its answer survive encoding; v0 leaves them out.
func TestMetadataFetchV1RoundTrip(t *testing.T) {
	eps := []MetadataEndpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093, SecurityProtocol: 0}}
	req := &MetadataFetchRequest{Version: 1, ClusterID: "c", NodeID: 104, DirectoryID: UUID{1, 2, 3}, Endpoints: eps}
	got := &MetadataFetchRequest{Version: 1}
	if err := got.ReadFrom(req.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("request: %v %+v", err, got)
	}
	resp := &MetadataFetchResponse{Version: 1, LeaderID: 101, Entries: []MetadataEntry{}, LeaderEndpoints: eps}
	gotResp := &MetadataFetchResponse{Version: 1}
	if err := gotResp.ReadFrom(resp.AppendTo(nil)); err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Fatalf("response: %v %+v", err, gotResp)
	}
	v0 := *req
	v0.Version = 0
	if len(v0.AppendTo(nil)) >= len(req.AppendTo(nil)) {
		t.Fatal("v0 carries the v1 fields")
	}
	if err := (&MetadataFetchRequest{Version: 1}).ReadFrom(v0.AppendTo(nil)); err == nil {
		t.Fatal("a v0 body read as v1")
	}
}
