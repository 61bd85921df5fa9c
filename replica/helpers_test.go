package replica

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

const self = 1

// topicConfigs is a LogConfigs with per-topic overrides of one default.
type topicConfigs map[string]config.Topic

func (c topicConfigs) LogConfig(_ *metadata.Image, topic string) config.Topic {
	if cfg, ok := c[topic]; ok {
		return cfg
	}
	return config.DefaultTopic()
}

// fixture is a manager for node 1 over a MemFS, fed hand-made images.
type fixture struct {
	t       *testing.T
	fs      *vfs.MemFS
	logs    *storage.Manager
	configs topicConfigs
	m       *Manager
	img     *metadata.Image
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, vfs.NewMemFS())
}

func newFixtureOn(t *testing.T, fs *vfs.MemFS) *fixture {
	t.Helper()
	return newFixtureDirs(t, fs, "/data")
}

// newFixtureDirs is newFixtureOn over several log dirs.
func newFixtureDirs(t *testing.T, fs *vfs.MemFS, dirs ...string) *fixture {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: fs, Dirs: dirs, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, fs: fs, logs: logs, configs: topicConfigs{}}
	f.m = NewManager(Options{NodeID: self, Logs: logs, Configs: f.configs, Logger: logger})
	t.Cleanup(func() {
		f.m.Stop()
		logs.Close()
	})
	f.img = &metadata.Image{}
	f.m.ApplyImage(nil, f.img)
	return f
}

// setTopic applies an image in which topic has these partitions (none:
// the topic is deleted).
func (f *fixture) setTopic(name string, id byte, parts ...metadata.Partition) {
	f.t.Helper()
	next := &metadata.Image{Offset: f.img.Offset + 1, Topics: f.img.Topics, TopicsByID: f.img.TopicsByID}
	if old := next.Topic(name); old != nil {
		next.TopicsByID = next.TopicsByID.Delete(old.ID)
		next.Topics = next.Topics.Delete(name)
	}
	if len(parts) > 0 {
		t := &metadata.Topic{Name: name, ID: protocol.UUID{id}, Partitions: persist.VectorOf(parts...)}
		next.Topics = next.Topics.Set(name, t)
		next.TopicsByID = next.TopicsByID.Set(t.ID, t)
	}
	prev := f.img
	f.img = next
	f.m.ApplyImage(prev, next)
}

func led(leader, epoch int32, replicas, isr []int32) metadata.Partition {
	return metadata.Partition{Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr}
}

// solo is a partition led by this node, its only replica.
func solo(epoch int32) metadata.Partition { return led(self, epoch, []int32{self}, []int32{self}) }

func batch(t testing.TB, n int, ts int64) []byte {
	t.Helper()
	b := protocol.NewBatchBuilder(protocol.CodecNone)
	for i := range n {
		b.Add([]byte{byte(i)}, []byte("value"), nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// appendResults collects Append completions.
type appendResults chan []AppendEntry

func (c appendResults) AppendCompleted(e []AppendEntry) { c <- e }

// fetchResults collects Fetch completions.
type fetchResults chan []FetchEntry

func (c fetchResults) FetchCompleted(e []FetchEntry) { c <- e }

func receive[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no completion")
		var zero T
		return zero
	}
}

// ready returns what ch already holds, failing if it holds nothing: the
// operation was to complete before returning.
func ready[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("the operation did not complete at once")
		var zero T
		return zero
	}
}

func pending[T any](t *testing.T, ch chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("completed early: %+v", v)
	case <-time.After(30 * time.Millisecond):
	}
}

// produce appends one batch of n records to tp and returns the result.
func (f *fixture) produce(tp TopicPartition, acks int16, n int) AppendResult {
	f.t.Helper()
	done := make(appendResults, 1)
	appendTo(f.m, acks, time.Second, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(f.t, n, time.Now().UnixMilli()), LeaderEpoch: -1}}, done)
	return receive(f.t, done)[0].Result
}

// appendTo appends and hands the final entries to done: at once when
// nothing waits, else through the pending append.
func appendTo(m *Manager, acks int16, timeout time.Duration, origin Origin, entries []AppendEntry, done AppendCompletion) {
	if pa := m.Append(acks, timeout, origin, entries); pa != nil {
		pa.Then(done)
		return
	}
	done.AppendCompleted(entries)
}
