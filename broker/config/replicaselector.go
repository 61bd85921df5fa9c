package config

import "fmt"

// RackAwareReplicaSelector is Kafka's one replica selector (KIP-392).
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// RackAwareReads says whether replica.selector.class is Kafka's
// RackAwareReplicaSelector (consumers with a client.rack fetch from a
// replica in their rack); unset means leaders only, and any other class
// is refused.
func (cfg *Broker) RackAwareReads() (bool, error) {
	switch sel := cfg.String("replica.selector.class"); sel {
	case "":
		return false, nil
	case RackAwareReplicaSelector:
		return true, nil
	default:
		return false, fmt.Errorf("replica.selector.class %s: Gregor runs no Java classes; it implements %s only", sel, RackAwareReplicaSelector)
	}
}
