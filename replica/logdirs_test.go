package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/vfs"
)

func TestAlterLogDir(t *testing.T) {
	f := newFixtureDirs(t, vfs.NewMemFS(), "/a", "/b")
	logs := f.logs
	f.setTopic("t", 1, solo(5))
	f.setTopic("elsewhere", 2, led(2, 1, []int32{2}, []int32{2}))
	here := TopicPartition{Topic: "t", Partition: 0}
	l, ok := logs.Get(here)
	if !ok {
		t.Fatal("no log for t-0")
	}
	other := "/b"
	if strings.HasPrefix(l.Dir(), "/b/") {
		other = "/a"
	}
	for _, c := range []struct {
		tp   TopicPartition
		dir  string
		want *kerr.Error
	}{
		{here, "/nowhere", kerr.LogDirNotFound},
		{TopicPartition{Topic: "nope", Partition: 0}, other, kerr.UnknownTopicOrPartition},
		{TopicPartition{Topic: "elsewhere", Partition: 0}, other, kerr.ReplicaNotAvailable},
		{here, other, nil},
	} {
		if got := f.m.AlterLogDir(c.tp, c.dir); got != c.want {
			t.Errorf("AlterLogDir(%s, %s) = %v, want %v", c.tp, c.dir, got, c.want)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasPrefix(l.Dir(), other+"/") {
		if time.Now().After(deadline) {
			t.Fatalf("t-0 still in %s", l.Dir())
		}
		time.Sleep(time.Millisecond)
	}
}
