package network

import (
	"strconv"
	"sync/atomic"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
)

// versionCounts counts one API's requests by version; versions past the
// last slot (none exist) share it.
type versionCounts [32]atomic.Uint64

func (v *versionCounts) add(version int16) {
	v[min(max(int(version), 0), len(v)-1)].Add(1)
}

// countRequest counts a decoded request of key at version: one atomic add
// on a table fixed when the server is built.
func (s *Server) countRequest(key, version int16) {
	if c := s.requests[key]; c != nil {
		c.add(version)
	}
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
	r.Collect(metrics.Requests, func(emit metrics.Emit) {
		for key, counts := range s.requests {
			name := protocol.KafkaName(key)
			for v := range counts {
				if n := counts[v].Load(); n > 0 {
					emit(float64(n), name, versions[v])
				}
			}
		}
	})
}
