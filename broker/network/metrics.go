package network

import (
	"strconv"
	"sync/atomic"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionCounts counts one API's requests by version; versions past the
// last slot (none exist) share it.
type versionCounts [32]atomic.Uint64

func (v *versionCounts) add(version int16) {
	v[min(max(int(version), 0), len(v)-1)].Add(1)
}

// countRequest counts a decoded request at its version: one atomic add on
// a table fixed when the server is built. A Fetch also counts as
// FetchConsumer or FetchFollower, as Kafka's RequestChannel counts it.
func (s *Server) countRequest(req kmsg.Request, version int16) {
	if c := s.requests[req.Key()]; c != nil {
		c.add(version)
	}
	if f, ok := req.(*kmsg.FetchRequest); ok {
		if fetchFromFollower(f) {
			s.fetchFollower.add(version)
		} else {
			s.fetchConsumer.add(version)
		}
	}
}

// fetchFromFollower reports whether a Fetch is a follower's: the replica
// id of the request (v0-14) or of its replica state (v15+) is a broker's.
func fetchFromFollower(f *kmsg.FetchRequest) bool {
	return f.ReplicaID >= 0 || f.ReplicaState.ID >= 0
}

// RegisterMetrics registers the server's request counts (Kafka's
// kafka.network:type=RequestMetrics,name=RequestsPerSec) by Kafka's API
// name and version; a version no request came in at is left out, as Kafka
// registers a version's meter with its first request.
func (s *Server) RegisterMetrics(r *metrics.Registry) {
	versions := make([]string, len(versionCounts{}))
	for i := range versions {
		versions[i] = strconv.Itoa(i)
	}
	emitCounts := func(emit metrics.Emit, name string, counts *versionCounts) {
		for v := range counts {
			if n := counts[v].Load(); n > 0 {
				emit(float64(n), name, versions[v])
			}
		}
	}
	r.Collect(metrics.Requests, func(emit metrics.Emit) {
		for key, counts := range s.requests {
			emitCounts(emit, protocol.KafkaName(key), counts)
		}
		emitCounts(emit, "FetchConsumer", &s.fetchConsumer)
		emitCounts(emit, "FetchFollower", &s.fetchFollower)
	})
}
