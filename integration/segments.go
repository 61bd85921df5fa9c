package integration

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// SegmentFile is a segment file (*.log) of a partition directory: its
// base offset and size.
type SegmentFile struct {
	Base, Size int64
}

// SegmentFiles lists a partition directory's segment files in offset
// order (a segment deleted while it is listed is left out).
func SegmentFiles(dir string) ([]SegmentFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []SegmentFile
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 20 {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		segs = append(segs, SegmentFile{Base: base, Size: info.Size()})
	}
	slices.SortFunc(segs, func(a, b SegmentFile) int { return int(a.Base - b.Base) })
	return segs, nil
}

// ListOffsetsRequest asks (ListOffsets v9, as a consumer) for partition 0
// of topic at timestamp ts: -1 latest, -2 earliest, -4 earliest local, -5
// latest tiered, or a time.
func ListOffsetsRequest(topic string, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
