package group

// A streams group's topology configured against the metadata image
// (Kafka's InternalTopicManager.configureTopics): missing source topics,
// the partition counts of repartition topics (a fixpoint over the
// subtopologies), copartitioning, the changelogs' counts (the number of
// tasks of their subtopology), and which internal topics are missing and
// must be created.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// configuredSubtopology is a subtopology with its number of tasks known.
type configuredSubtopology struct {
	numTasks int32
	stateful bool
	// inputTopics are its source and repartition source topics, in the
	// topology's order; partitionCounts has each one's count.
	inputTopics     []string
	partitionCounts map[string]int32
}

// configuredTopology is the outcome: ready when status is nil.
type configuredTopology struct {
	subtopologies      map[string]*configuredSubtopology
	internalPartitions map[string]int32 // every internal topic's decided count
	status             *kmsg.StreamsGroupHeartbeatResponseStatus
	toCreate           []kmsg.CreateTopicsRequestTopic
}

func (c *configuredTopology) ready() bool { return c != nil && c.status == nil }

// errInvalidTopology is a topology that can never be configured
// (STREAMS_INVALID_TOPOLOGY).
type errInvalidTopology struct{ msg string }

func (e errInvalidTopology) Error() string { return e.msg }

func listTopics(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d additional topics", strings.Join(names[:3], ", "), len(names)-3)
}

// sortedCounts prints topic counts as Java prints a sorted map: {a=3, b=4}.
func sortedCounts(m map[string]int32) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func (s *shard) configureTopology(t *streamsTopologyValue) (*configuredTopology, error) {
	out := &configuredTopology{subtopologies: map[string]*configuredSubtopology{}, internalPartitions: map[string]int32{}}
	if t == nil {
		out.status = &kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: statusMissingSourceTopics, StatusDetail: "The topology is not known."}
		return out, nil
	}
	existing := func(name string) (int32, bool) {
		info, ok := s.c.topics.TopicByName(name)
		return info.Partitions, ok
	}

	// Missing source topics.
	var missing []string
	for _, st := range t.Subtopologies {
		for _, n := range st.SourceTopics {
			if _, ok := existing(n); !ok && !slices.Contains(missing, n) {
				missing = append(missing, n)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		out.status = &kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: statusMissingSourceTopics, StatusDetail: fmt.Sprintf("Source topics %s are missing.", listTopics(missing))}
		return out, nil
	}

	// Repartition topics' partition counts: explicit ones, then a fixpoint
	// where a sink gets the largest count of its subtopology's inputs.
	decided := map[string]int32{}
	fixed := map[string]bool{}
	for _, st := range t.Subtopologies {
		for _, r := range st.RepartitionSourceTopics {
			if r.Partitions != 0 {
				decided[r.Name] = r.Partitions
				fixed[r.Name] = true
			}
		}
	}
	countOf := func(name string) (int32, bool) {
		if n, ok := decided[name]; ok {
			return n, true
		}
		return existing(name)
	}
	for {
		needed, progress := false, false
		for _, st := range t.Subtopologies {
			for _, sink := range st.RepartitionSinkTopics {
				if _, ok := decided[sink]; ok {
					continue
				}
				best := int32(0)
				for _, r := range st.RepartitionSourceTopics {
					if n, ok := countOf(r.Name); ok && n > best {
						best = n
					}
				}
				for _, src := range st.SourceTopics {
					if n, ok := existing(src); ok && n > best {
						best = n
					}
				}
				if best == 0 {
					needed = true
					continue
				}
				decided[sink] = best
				progress = true
			}
		}
		if !needed {
			break
		}
		if !progress {
			return nil, errInvalidTopology{"Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved."}
		}
	}
	for _, st := range t.Subtopologies {
		for _, r := range st.RepartitionSourceTopics {
			if _, ok := decided[r.Name]; !ok {
				return nil, errInvalidTopology{"Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic."}
			}
		}
	}

	// Copartitioning.
	for _, st := range t.Subtopologies {
		for _, cg := range st.CopartitionGroups {
			var repart, others []string
			for _, i := range cg.SourceTopics {
				if int(i) < 0 || int(i) >= len(st.SourceTopics) {
					return nil, errors.New("copartition group index out of range")
				}
				others = append(others, st.SourceTopics[i])
			}
			for _, i := range cg.RepartitionSourceTopics {
				if int(i) < 0 || int(i) >= len(st.RepartitionSourceTopics) {
					return nil, errors.New("copartition group index out of range")
				}
				repart = append(repart, st.RepartitionSourceTopics[i].Name)
			}
			if status, err := copartition(others, repart, fixed, decided, existing); err != nil || status != nil {
				if err != nil {
					return nil, err
				}
				out.status = status
				return out, nil
			}
		}
	}

	// Changelogs, tasks, and which internal topics exist.
	type internal struct {
		info       streamsTopicInfo
		partitions int32
	}
	internals := map[string]internal{}
	for _, st := range t.Subtopologies {
		cs := &configuredSubtopology{partitionCounts: map[string]int32{}, stateful: len(st.StateChangelogTopics) > 0}
		for _, n := range st.SourceTopics {
			c, _ := existing(n)
			cs.inputTopics = append(cs.inputTopics, n)
			cs.partitionCounts[n] = c
			cs.numTasks = max(cs.numTasks, c)
		}
		for _, r := range st.RepartitionSourceTopics {
			c := decided[r.Name]
			cs.inputTopics = append(cs.inputTopics, r.Name)
			cs.partitionCounts[r.Name] = c
			cs.numTasks = max(cs.numTasks, c)
			internals[r.Name] = internal{r, c}
		}
		if len(cs.inputTopics) == 0 {
			return nil, errInvalidTopology{fmt.Sprintf("No source topics found for subtopology %s", st.ID)}
		}
		for _, cl := range st.StateChangelogTopics {
			internals[cl.Name] = internal{cl, cs.numTasks}
		}
		out.subtopologies[st.ID] = cs
	}
	for name, in := range internals {
		out.internalPartitions[name] = in.partitions
	}
	var missingInternal []string
	for _, name := range slices.Sorted(maps.Keys(internals)) {
		want := internals[name].partitions
		if n, ok := existing(name); ok {
			if n != want {
				out.status = &kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: statusIncorrectlyPartitionedTopics,
					StatusDetail: fmt.Sprintf("Existing topic %s has different number of partitions: expected %d, found %d", name, want, n)}
				return out, nil
			}
			continue
		}
		missingInternal = append(missingInternal, name)
	}
	if len(missingInternal) > 0 {
		for _, name := range missingInternal {
			in := internals[name]
			ct := kmsg.NewCreateTopicsRequestTopic()
			ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, in.partitions, -1
			if in.info.ReplicationFactor != 0 {
				ct.ReplicationFactor = in.info.ReplicationFactor
			}
			for _, c := range in.info.Configs {
				cfg := kmsg.NewCreateTopicsRequestTopicConfig()
				cfg.Name, cfg.Value = c.Key, strPtr(c.Value)
				ct.Configs = append(ct.Configs, cfg)
			}
			out.toCreate = append(out.toCreate, ct)
		}
		out.status = &kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: statusMissingInternalTopics,
			StatusDetail: fmt.Sprintf("Internal topics are missing: %s", listTopics(missingInternal))}
	}
	return out, nil
}

// copartition enforces one copartition group (Kafka's
// CopartitionedTopicsEnforcer): its topics must have one partition count,
// the repartition topics taking the count of the others. A non-nil status
// is INCORRECTLY_PARTITIONED_TOPICS.
func copartition(others, repart []string, fixed map[string]bool, decided map[string]int32, existing func(string) (int32, bool)) (*kmsg.StreamsGroupHeartbeatResponseStatus, error) {
	bad := func(detail string) *kmsg.StreamsGroupHeartbeatResponseStatus {
		return &kmsg.StreamsGroupHeartbeatResponseStatus{StatusCode: statusIncorrectlyPartitionedTopics, StatusDetail: detail}
	}
	counts := map[string]int32{}
	for _, n := range others {
		c, _ := existing(n)
		counts[n] = c
	}
	repartCounts := map[string]int32{}
	for _, n := range repart {
		repartCounts[n] = decided[n]
	}
	var target int32
	if len(others) == 0 {
		anyFixed := false
		for _, n := range repart {
			if fixed[n] {
				if !anyFixed {
					target, anyFixed = repartCounts[n], true
				} else if repartCounts[n] != target {
					return bad(fmt.Sprintf("Following topics do not have the same number of partitions: [%s]", sortedCounts(repartCounts))), nil
				}
			}
		}
		if !anyFixed {
			for _, c := range repartCounts {
				target = max(target, c)
			}
			if target == 0 {
				return nil, errInvalidTopology{fmt.Sprintf("All topics in the copartition group had undefined partition number: [%s]", strings.Join(slices.Sorted(slices.Values(repart)), ", "))}
			}
		}
	} else {
		first := true
		for _, n := range others {
			if first {
				target, first = counts[n], false
			} else if counts[n] != target {
				return bad(fmt.Sprintf("Following topics do not have the same number of partitions: [%s]", sortedCounts(counts))), nil
			}
		}
	}
	for _, n := range repart {
		if fixed[n] && repartCounts[n] != target {
			return bad(fmt.Sprintf("Number of partitions [%d] of repartition topic [%s] doesn't match number of partitions [%d] of the source topic.", repartCounts[n], n, target)), nil
		}
		decided[n] = target
	}
	return nil, nil
}
