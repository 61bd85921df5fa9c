package controller

import (
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// FuzzDecodeFormat: a damaged bootstrap.checkpoint is an error, never a
// panic, and whatever decodes re-encodes to the same information.
func FuzzDecodeFormat(f *testing.F) {
	f.Add(encodeFormat(FormatInfo{
		ClusterID: "c", NodeID: 1, DirectoryID: protocol.RandomUUID(),
		Voters:   []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "h", Port: 9093}}}},
		Features: map[string]int16{metadata.MetadataVersionFeature: metadata.LatestMetadataVersion},
	}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		info, err := decodeFormat(raw)
		if err != nil {
			return
		}
		again, err := decodeFormat(encodeFormat(info))
		if err != nil || again.ClusterID != info.ClusterID || again.NodeID != info.NodeID || len(again.Voters) != len(info.Voters) {
			t.Fatalf("round trip changed %+v into %+v (%v)", info, again, err)
		}
	})
}
