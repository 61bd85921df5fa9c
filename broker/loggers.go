package broker

// BROKER_LOGGER config resources (KIP-412): this node's logger levels, as
// DescribeConfigs (key 32) reports them and IncrementalAlterConfigs (key
// 44) changes them (kafka-configs --entity-type broker-loggers). The
// requests' other resources are configs.go's and dynamicbroker.go's.
//
// The loggers are root and Gregor's components (Options.LogLevels,
// internal/loglevel); a component without a level of its own logs at
// root's. A resource names this node's id: the levels are this process's
// and are never forwarded, nor kept across a restart, as in Kafka.
//
//   - Describe lists every logger with its effective level, source
//     DYNAMIC_BROKER_LOGGER_CONFIG, neither read-only nor sensitive, no
//     synonyms, and no type or documentation (Kafka's ConfigHelper sets
//     neither); named configs filter the list, unknown names are left
//     out. An empty, non-numeric or other node's id is INVALID_REQUEST
//     with ConfigHelper's messages.
//   - IncrementalAlterConfigs checks what Kafka's ConfigAdminManager and
//     RuntimeLoggerManager check, in their order, each failure answering
//     the whole resource and changing nothing: a resource named twice,
//     a logger named twice, a missing value, ALTER_CONFIGS on the
//     cluster (CLUSTER_ACTION on a controller listener, as Kafka's
//     ControllerApis asks), the node id, then each operation: SET of a
//     logger that exists to one of TRACE, DEBUG, INFO, WARN, ERROR,
//     FATAL (case-sensitive; INVALID_CONFIG otherwise), DELETE of a
//     logger that exists but root (its level goes back to root's),
//     APPEND and SUBTRACT refused with INVALID_REQUEST. validateOnly
//     checks without changing. Each change is logged at WARN.
//   - Legacy AlterConfigs has no BROKER_LOGGER resources: INVALID_REQUEST
//     "Unknown resource type 8", as Kafka's broker answers.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/internal/loglevel"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// settableLevels are the levels IncrementalAlterConfigs may set (Kafka's
// LogLevelConfig.VALID_LOG_LEVELS), as its error message lists them.
const settableLevels = "DEBUG, ERROR, FATAL, INFO, TRACE, WARN"

// describeLoggers answers a BROKER_LOGGER resource of DescribeConfigs:
// the loggers named in names (all of them when names is empty), or the
// error for a resource that is not this node's.
func (b *Broker) describeLoggers(name string, names []string) ([]kmsg.DescribeConfigsResponseResourceConfig, *kerr.Error, string) {
	if name == "" {
		return nil, kerr.InvalidRequest, "Broker id must not be empty"
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return nil, kerr.InvalidRequest, "Broker id must be an integer, but it is: " + name
	}
	if int32(id) != b.opts.NodeID {
		return nil, kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d but received %s", b.opts.NodeID, name)
	}
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	configs := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, l := range b.opts.LogLevels.Loggers() {
		if len(wanted) > 0 && !wanted[l.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = l.Name
		level := loglevel.LevelName(l.Level)
		c.Value = &level
		c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
		c.ConfigSynonyms = []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{}
		configs = append(configs, c)
	}
	return configs, nil, ""
}

// loggerAnswer is how a BROKER_LOGGER resource of an alter request is
// answered: its error code, 0 when it succeeded, and message.
type loggerAnswer struct {
	code int16
	msg  *string
}

func loggerError(e *kerr.Error, msg string) loggerAnswer {
	return loggerAnswer{code: e.Code, msg: &msg}
}

// alterLoggers checks and (unless validateOnly) applies the operations of
// one BROKER_LOGGER resource of IncrementalAlterConfigs. onController: the
// request came on a controller listener, where Kafka's ControllerApis asks
// for CLUSTER_ACTION and fills in the messages Kafka's broker leaves out.
func (b *Broker) alterLoggers(who identity, validateOnly, onController bool, res kmsg.IncrementalAlterConfigsRequestResource) loggerAnswer {
	seen := map[string]bool{}
	var nulls []string
	for _, c := range res.Configs {
		if seen[c.Name] {
			return loggerError(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[c.Name] = true
		if c.Op != kmsg.IncrementalAlterConfigOpDelete && c.Value == nil {
			nulls = append(nulls, c.Name)
		}
	}
	if len(nulls) > 0 {
		return loggerError(kerr.InvalidRequest, "Null value not supported for : "+strings.Join(nulls, ", "))
	}
	op := kmsg.ACLOperationAlterConfigs
	if onController {
		op = kmsg.ACLOperationClusterAction
	}
	if !b.clusterAllowed(who, op) {
		// Kafka's broker drops a message that only repeats the error's
		// own; its controller sends it.
		if onController {
			return loggerError(kerr.ClusterAuthorizationFailed, kafkaMessage(kerr.ClusterAuthorizationFailed.Code))
		}
		return loggerAnswer{code: kerr.ClusterAuthorizationFailed.Code}
	}
	id, err := strconv.ParseInt(res.ResourceName, 10, 32)
	if err != nil {
		return loggerError(kerr.InvalidRequest, "Node id must be an integer, but it is: "+res.ResourceName)
	}
	if int32(id) != b.opts.NodeID {
		// Kafka's RuntimeLoggerManager names its own id twice here,
		// not the one received; clients may match the text.
		return loggerError(kerr.InvalidRequest, fmt.Sprintf("Unexpected node id. Expected %d, but received %d", b.opts.NodeID, b.opts.NodeID))
	}
	levels := b.opts.LogLevels
	for _, c := range res.Configs {
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if !levels.Exists(c.Name) {
				return loggerError(kerr.InvalidConfig, "Logger "+c.Name+" does not exist!")
			}
			if l, ok := loglevel.ParseLevel(*c.Value); !ok || l == loglevel.LevelOff {
				return loggerError(kerr.InvalidConfig, "Cannot set the log level of "+c.Name+" to "+*c.Value+
					" as it is not a supported log level. Valid log levels are "+settableLevels)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if !levels.Exists(c.Name) {
				return loggerError(kerr.InvalidConfig, "Logger "+c.Name+" does not exist!")
			}
			if c.Name == loglevel.Root {
				return loggerError(kerr.InvalidRequest, "Removing the log level of the root logger is not allowed")
			}
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return loggerError(kerr.InvalidRequest, c.Op.String()+" operation is not allowed for the BROKER_LOGGER resource")
		default:
			// Kafka fails on an operation it has no name for (its
			// switch meets null): UNKNOWN_SERVER_ERROR, whose message
			// only its controller sends.
			if onController {
				return loggerError(kerr.UnknownServerError, kafkaMessage(kerr.UnknownServerError.Code))
			}
			return loggerAnswer{code: kerr.UnknownServerError.Code}
		}
	}
	if validateOnly {
		return loggerAnswer{}
	}
	for _, c := range res.Configs {
		if c.Op == kmsg.IncrementalAlterConfigOpSet {
			l, _ := loglevel.ParseLevel(*c.Value)
			levels.Set(c.Name, l)
			b.log.Warn("Updated the log level of "+c.Name+" to "+*c.Value, "logger", c.Name, "level", *c.Value)
		} else {
			levels.Unset(c.Name)
			b.log.Warn("Unset the log level of "+c.Name, "logger", c.Name)
		}
	}
	return loggerAnswer{}
}

// answerLoggerResources answers the BROKER_LOGGER resources of an alter
// request here (the others go on to the controller): each gets answer(i)
// unless it is named more than once, which Kafka refuses for every copy.
func answerLoggerResources(keys []resourceKey, answer func(i int) loggerAnswer) []refusal {
	count := map[resourceKey]int{}
	for _, k := range keys {
		count[k]++
	}
	var answered []refusal
	done := map[resourceKey]bool{}
	for i, k := range keys {
		if metadata.ConfigResourceType(k.typ) != metadata.ConfigResourceBrokerLogger || done[k] {
			continue
		}
		done[k] = true
		a := loggerError(kerr.InvalidRequest, "Each resource must appear at most once.")
		if count[k] == 1 {
			a = answer(i)
		}
		answered = append(answered, refusal{resourceKey: k, code: a.code, msg: a.msg})
	}
	return answered
}

// incrementalLoggerAnswers answers an IncrementalAlterConfigs request's
// BROKER_LOGGER resources.
func (b *Broker) incrementalLoggerAnswers(r *network.Request, req *kmsg.IncrementalAlterConfigsRequest, keys []resourceKey) []refusal {
	who := identityOf(r)
	return answerLoggerResources(keys, func(i int) loggerAnswer {
		return b.alterLoggers(who, req.ValidateOnly, r.ControllerListener(), req.Resources[i])
	})
}

// legacyLoggerAnswers answers a legacy AlterConfigs request's BROKER_LOGGER
// resources: Kafka's broker knows no such type there.
func legacyLoggerAnswers(keys []resourceKey) []refusal {
	return answerLoggerResources(keys, func(int) loggerAnswer {
		return loggerError(kerr.InvalidRequest, fmt.Sprintf("Unknown resource type %d", metadata.ConfigResourceBrokerLogger))
	})
}
