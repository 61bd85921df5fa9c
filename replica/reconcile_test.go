package replica

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// imageConfigs is a LogConfigs that reads segment.bytes from the image as
// the broker does (topic config, else this broker's, else the cluster
// default) and counts its calls per topic.
type imageConfigs struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *imageConfigs) LogConfig(img *metadata.Image, topic string) config.Topic {
	c.mu.Lock()
	c.calls[topic]++
	c.mu.Unlock()
	cfg := config.DefaultTopic()
	cfg.SegmentIndexBytes = 4096 // small files for MemFS
	for _, res := range []metadata.ConfigResource{
		{Type: metadata.ConfigResourceTopic, Name: topic},
		{Type: metadata.ConfigResourceBroker, Name: strconv.Itoa(self)},
		{Type: metadata.ConfigResourceBroker, Name: ""},
	} {
		if v, ok := img.Configs[res]["segment.bytes"]; ok {
			n, _ := strconv.Atoi(v)
			cfg.SegmentBytes = int32(n)
			break
		}
	}
	return cfg
}

func (c *imageConfigs) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// diffFixture feeds a manager copy-on-write images, as replay builds them:
// each change copies only what it touches.
type diffFixture struct {
	t       *testing.T
	logs    *storage.Manager
	configs *imageConfigs
	m       *Manager
	img     *metadata.Image
	opened  []TopicPartition
	events  listener
}

func newDiffFixture(t *testing.T, fs *vfs.MemFS) *diffFixture {
	t.Helper()
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: []string{"/data"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &diffFixture{t: t, logs: logs, configs: &imageConfigs{calls: map[string]int{}}}
	f.m = NewManager(Options{NodeID: self, Logs: logs, Configs: f.configs})
	f.m.openHook = func(reqs []storage.LogRequest) {
		for _, r := range reqs {
			f.opened = append(f.opened, r.TopicPartition)
		}
	}
	t.Cleanup(func() {
		f.m.Stop()
		logs.Close()
	})
	f.img = &metadata.Image{
		Brokers: map[int32]*metadata.Broker{self: {ID: self, Epoch: 1}, 2: {ID: 2, Epoch: 1}},
		Configs: map[metadata.ConfigResource]map[string]string{},
	}
	f.m.ApplyImage(nil, f.img)
	f.m.AddLeadershipListener("a", &f.events)
	f.m.AddLeadershipListener("b", &f.events)
	return f
}

// apply applies the image change makes to a shallow copy of the current
// one (the top-level maps copied, every topic, broker and config shared)
// and returns the partitions it opened.
func (f *diffFixture) apply(change func(next *metadata.Image)) []TopicPartition {
	f.t.Helper()
	next := *f.img
	next.Offset++
	next.Topics = f.img.Topics
	next.TopicsByID = f.img.TopicsByID
	next.Brokers = maps.Clone(f.img.Brokers)
	next.Configs = maps.Clone(f.img.Configs)
	change(&next)
	prev := f.img
	f.img = &next
	f.opened = nil
	f.m.ApplyImage(prev, &next)
	opened := f.opened
	slices.SortFunc(opened, func(a, b TopicPartition) int { return strings.Compare(a.String(), b.String()) })
	return opened
}

// setTopic puts a new *Topic under name (a new ID when id differs).
func setTopic(img *metadata.Image, name string, id byte, parts ...metadata.Partition) {
	if old := img.Topic(name); old != nil {
		img.TopicsByID = img.TopicsByID.Delete(old.ID)
	}
	t := &metadata.Topic{Name: name, ID: protocol.UUID{id}, Partitions: persist.VectorOf(parts...)}
	img.Topics, img.TopicsByID = img.Topics.Set(name, t), img.TopicsByID.Set(t.ID, t)
}

// changePartition copies topic name with partition i replaced, as a
// PartitionChangeRecord does.
func changePartition(img *metadata.Image, name string, i int, p metadata.Partition) {
	old := img.Topic(name)
	cp := *old
	p.PartitionEpoch = old.Partitions.At(i).PartitionEpoch + 1
	e := old.Partitions.Edit()
	e.Set(i, p)
	cp.Partitions = e.Done()
	img.Topics, img.TopicsByID = img.Topics.Set(name, &cp), img.TopicsByID.Set(cp.ID, &cp)
}

func setConfig(img *metadata.Image, res metadata.ConfigResource, key, value string) {
	m := maps.Clone(img.Configs[res])
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	img.Configs[res] = m
}

func tps(topic string, parts ...int32) []TopicPartition {
	out := make([]TopicPartition, len(parts))
	for i, p := range parts {
		out[i] = TopicPartition{Topic: topic, Partition: p}
	}
	return out
}

func away() metadata.Partition { return led(2, 0, []int32{2}, []int32{2}) }

// Each kind of image change is applied exactly once: only new partitions
// are opened, unchanged topics are neither reopened nor given a config
// again (one config per changed topic, not per partition), and
// deletions, recreations, leadership and config changes all take effect.
func TestReconcileAppliesOnlyWhatChanged(t *testing.T) {
	f := newDiffFixture(t, vfs.NewMemFS())
	topicA := metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "a"}
	steps := []struct {
		name    string
		change  func(*metadata.Image)
		opened  []TopicPartition
		configs map[string]int // LogConfig calls per topic
		events  []string       // leadership listener calls, sorted
		check   func(t *testing.T)
	}{
		{
			name:    "create a (two of three partitions here)",
			change:  func(img *metadata.Image) { setTopic(img, "a", 1, solo(0), away(), solo(0)) },
			opened:  tps("a", 0, 2),
			configs: map[string]int{"a": 1},
			events:  []string{"lead a-0@0", "lead a-2@0"},
		},
		{
			name:    "create b",
			change:  func(img *metadata.Image) { setTopic(img, "b", 2, solo(0), solo(0), solo(0), solo(0)) },
			opened:  tps("b", 0, 1, 2, 3),
			configs: map[string]int{"b": 1},
			events:  []string{"lead b-0@0", "lead b-1@0", "lead b-2@0", "lead b-3@0"},
		},
		{
			name:   "an unrelated change (another broker fenced)",
			change: func(img *metadata.Image) { img.Brokers[2] = &metadata.Broker{ID: 2, Epoch: 1, Fenced: true} },
		},
		{
			name:   "a topic with no replica here",
			change: func(img *metadata.Image) { setTopic(img, "elsewhere", 3, away(), away()) },
		},
		{
			name: "leadership of a-0 moves away",
			change: func(img *metadata.Image) {
				changePartition(img, "a", 0, led(2, 1, []int32{self, 2}, []int32{self, 2}))
			},
			events: []string{"resign a-0"},
			check: func(t *testing.T) {
				if p, ke, _ := f.m.leaderPartition(TopicPartition{Topic: "a"}, -1, true); p != nil || ke != kerr.NotLeaderForPartition {
					t.Fatalf("a-0 still led here: %v", ke)
				}
			},
		},
		{
			name:    "a's config changes",
			change:  func(img *metadata.Image) { setConfig(img, topicA, "segment.bytes", "2048") },
			configs: map[string]int{"a": 1},
			check: func(t *testing.T) {
				for _, tp := range tps("a", 0, 2) {
					if got := f.m.hosted(tp).log.Config().SegmentBytes; got != 2048 {
						t.Fatalf("%s: segment.bytes %d", tp, got)
					}
				}
				if got := f.m.hosted(TopicPartition{Topic: "b"}).log.Config().SegmentBytes; got == 2048 {
					t.Fatal("b got a's config")
				}
			},
		},
		{
			name: "the broker's log default changes",
			change: func(img *metadata.Image) {
				setConfig(img, metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: ""}, "segment.bytes", "4096")
			},
			configs: map[string]int{"a": 1, "b": 1}, // none for a topic with no replica here
			check: func(t *testing.T) {
				if got := f.m.hosted(TopicPartition{Topic: "b", Partition: 3}).log.Config().SegmentBytes; got != 4096 {
					t.Fatalf("b-3: segment.bytes %d", got)
				}
				if got := f.m.hosted(TopicPartition{Topic: "a"}).log.Config().SegmentBytes; got != 2048 {
					t.Fatalf("a-0 lost its topic config: %d", got)
				}
			},
		},
		{
			name:    "a gains a partition",
			change:  func(img *metadata.Image) { changeAppend(img, "a", solo(0)) },
			opened:  tps("a", 3),
			configs: map[string]int{"a": 1},
			events:  []string{"lead a-3@0"},
		},
		{
			name:   "a-2 is reassigned away",
			change: func(img *metadata.Image) { changePartition(img, "a", 2, away()) },
			events: []string{"resign a-2"},
			check: func(t *testing.T) {
				if _, ok := f.logs.Get(TopicPartition{Topic: "a", Partition: 2}); ok || f.m.Hosts(TopicPartition{Topic: "a", Partition: 2}) {
					t.Fatal("a-2 still hosted")
				}
			},
		},
		{
			name:   "b is deleted",
			change: func(img *metadata.Image) { deleteTopic(img, "b") },
			events: []string{"resign b-0", "resign b-1", "resign b-2", "resign b-3"},
			check: func(t *testing.T) {
				for _, tp := range tps("b", 0, 1, 2, 3) {
					if _, ok := f.logs.Get(tp); ok {
						t.Fatalf("%s still open", tp)
					}
				}
			},
		},
		{
			name:    "b is created again (new ID), then a record is produced",
			change:  func(img *metadata.Image) { setTopic(img, "b", 4, solo(0)) },
			opened:  tps("b", 0),
			configs: map[string]int{"b": 1},
			events:  []string{"lead b-0@0"},
		},
		{
			name:    "b is recreated within one image (same name, new ID)",
			change:  func(img *metadata.Image) { setTopic(img, "b", 5, solo(0)) },
			opened:  tps("b", 0),
			configs: map[string]int{"b": 1},
			events:  []string{"lead b-0@0", "resign b-0"},
			check: func(t *testing.T) {
				p := f.m.hosted(TopicPartition{Topic: "b"})
				if p.topicID != (protocol.UUID{5}) || p.log.LogEndOffset() != 0 {
					t.Fatalf("b-0: topic %v, log end %d: the old topic's log serves the new one", p.topicID, p.log.LogEndOffset())
				}
			},
		},
		{
			name: "this broker's registration changes",
			change: func(img *metadata.Image) {
				img.Brokers[self] = &metadata.Broker{ID: self, Epoch: 2}
			},
			configs: map[string]int{"a": 1, "b": 1}, // none for a topic with no replica here
		},
	}
	for _, s := range steps {
		f.configs.take()
		f.events.take()
		opened := f.apply(s.change)
		if !slices.Equal(opened, s.opened) {
			t.Fatalf("%s: opened %v, want %v", s.name, opened, s.opened)
		}
		if got := f.configs.take(); !maps.Equal(got, s.configs) && (len(got) > 0 || len(s.configs) > 0) {
			t.Fatalf("%s: configs computed %v, want %v", s.name, got, s.configs)
		}
		events := f.events.take()
		slices.Sort(events)
		if !slices.Equal(events, s.events) {
			t.Fatalf("%s: listeners heard %v, want %v", s.name, events, s.events)
		}
		if s.name == "b is created again (new ID), then a record is produced" {
			if r := produceTo(t, f.m, TopicPartition{Topic: "b"}); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if s.check != nil {
			s.check(t)
		}
	}
}

func changeAppend(img *metadata.Image, name string, p metadata.Partition) {
	old := img.Topic(name)
	cp := *old
	e := old.Partitions.Edit()
	e.Append(p)
	cp.Partitions = e.Done()
	img.Topics, img.TopicsByID = img.Topics.Set(name, &cp), img.TopicsByID.Set(cp.ID, &cp)
}

func deleteTopic(img *metadata.Image, name string) {
	img.TopicsByID = img.TopicsByID.Delete(img.Topic(name).ID)
	img.Topics = img.Topics.Delete(name)
	delete(img.Configs, metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: name})
}

// produceTo appends one record to tp (acks=1) and returns the outcome.
func produceTo(t *testing.T, m *Manager, tp TopicPartition) AppendResult {
	t.Helper()
	done := make(appendResults, 1)
	appendTo(m, 1, 0, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, 1), LeaderEpoch: -1}}, done)
	return receive(t, done)[0].Result
}

// A partition whose log fails to open is offline (KAFKA_STORAGE_ERROR)
// and opened again with the next image, even one that does not touch its
// topic.
func TestReconcileRetriesAPartitionThatFailedToOpen(t *testing.T) {
	fs := vfs.NewMemFS()
	f := newDiffFixture(t, fs)
	fs.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpMkdir && strings.HasSuffix(name, "/a-1") {
			return fmt.Errorf("injected")
		}
		return nil
	})
	f.apply(func(img *metadata.Image) { setTopic(img, "a", 1, solo(0), solo(0)) })
	if _, ke := f.m.partitionOrError(TopicPartition{Topic: "a", Partition: 1}); ke != kerr.KafkaStorageError {
		t.Fatalf("a-1: %v, want KAFKA_STORAGE_ERROR", ke)
	}
	if got := f.events.take(); !slices.Equal(got, []string{"lead a-0@0"}) {
		t.Fatalf("listeners heard %v", got)
	}
	fs.Inject(nil)
	opened := f.apply(func(img *metadata.Image) { setTopic(img, "unrelated", 9, away()) })
	if !slices.Equal(opened, tps("a", 1)) {
		t.Fatalf("opened %v, want a-1 again", opened)
	}
	if r := produceTo(t, f.m, TopicPartition{Topic: "a", Partition: 1}); r.Err != nil {
		t.Fatalf("a-1 after the retry: %v", r.Err)
	}
	if got := f.events.take(); !slices.Equal(got, []string{"lead a-1@0"}) {
		t.Fatalf("listeners heard %v", got)
	}
	if opened := f.apply(func(img *metadata.Image) { setTopic(img, "unrelated2", 10, away()) }); len(opened) != 0 {
		t.Fatalf("opened %v once nothing is offline", opened)
	}
}

// A restart's first image opens every partition on disk at once, through
// one OpenLogs call, and a produce works on each.
func TestFirstImageOpensEveryPartitionTogether(t *testing.T) {
	fs := vfs.NewMemFS()
	f := newDiffFixture(t, fs)
	parts := make([]metadata.Partition, 20)
	for i := range parts {
		parts[i] = solo(0)
	}
	f.apply(func(img *metadata.Image) { setTopic(img, "a", 1, parts...) })
	img := f.img
	f.m.Stop()
	f.logs.Close()

	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: []string{"/data"}})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	m := NewManager(Options{NodeID: self, Logs: logs, Configs: &imageConfigs{calls: map[string]int{}}})
	defer m.Stop()
	var batches [][]storage.LogRequest
	m.openHook = func(reqs []storage.LogRequest) { batches = append(batches, reqs) }
	m.ApplyImage(nil, img)
	if len(batches) != 1 || len(batches[0]) != 20 {
		t.Fatalf("opened in %d batches", len(batches))
	}
	for i := range parts {
		if r := produceTo(t, m, TopicPartition{Topic: "a", Partition: int32(i)}); r.Err != nil {
			t.Fatalf("a-%d: %v", i, r.Err)
		}
	}
}

// TestReconcileVisitsOnlyChangedPartitions: issue 27's metadata changes
// O(changed), on the broker. A change to one partition of a topic of 3,000
// makes the manager compare that partition alone (the persistent partition
// vectors are diffed leaf by leaf), a change elsewhere none of them; a
// topic config change, which every partition's log takes, all of them.
func TestReconcileVisitsOnlyChangedPartitions(t *testing.T) {
	f := newDiffFixture(t, vfs.NewMemFS())
	parts := make([]metadata.Partition, 3000)
	for i := range parts {
		parts[i] = away()
	}
	steps := []struct {
		name   string
		change func(*metadata.Image)
		want   int
	}{
		{"create big (3,000 partitions, none here)", func(img *metadata.Image) { setTopic(img, "big", 1, parts...) }, 3000},
		{"create small", func(img *metadata.Image) { setTopic(img, "small", 2, solo(0)) }, 1},
		{"move one leader of big", func(img *metadata.Image) {
			changePartition(img, "big", 1234, led(3, 1, []int32{2, 3}, []int32{2, 3}))
		}, 1},
		{"add a partition to big", func(img *metadata.Image) { changeAppend(img, "big", away()) }, 1},
		{"move small's leader", func(img *metadata.Image) {
			changePartition(img, "small", 0, led(self, 1, []int32{self}, []int32{self}))
		}, 1},
		{"big's config", func(img *metadata.Image) {
			setConfig(img, metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "big"}, "segment.bytes", "1048576")
		}, 3001},
		{"another broker fenced", func(img *metadata.Image) { img.Brokers[2] = &metadata.Broker{ID: 2, Epoch: 1, Fenced: true} }, 0},
	}
	for _, s := range steps {
		f.apply(s.change)
		f.m.applyMu.Lock()
		got := f.m.lastVisited
		f.m.applyMu.Unlock()
		if got != s.want {
			t.Errorf("%s: %d partitions compared, want %d", s.name, got, s.want)
		}
	}
}
