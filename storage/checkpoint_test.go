package storage

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

func TestOffsetCheckpointFormat(t *testing.T) {
	m := map[TopicPartition]int64{{"b", 1}: 7, {"a-x", 0}: 42, {"b", 0}: 0}
	got := string(encodeOffsetCheckpoint(m))
	want := "0\n3\na-x 0 42\nb 0 0\nb 1 7\n"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := decodeOffsetCheckpoint([]byte(want))
	if err != nil || len(back) != 3 || back[TopicPartition{"a-x", 0}] != 42 {
		t.Fatalf("decode: %v %v", back, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "x\n"} {
		if _, err := decodeOffsetCheckpoint([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if m, err := readOffsetCheckpoint(vfs.NewMemFS(), "/nope"); err != nil || len(m) != 0 {
		t.Fatalf("missing file: %v %v", m, err)
	}
}

func TestLeaderEpochCheckpointFormat(t *testing.T) {
	got := string(encodeEpochCheckpoint([]EpochEntry{{0, 0}, {3, 120}}))
	if want := "0\n2\n0 0\n3 120\n"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	back, err := decodeEpochCheckpoint([]byte(got))
	if err != nil || len(back) != 2 || back[1] != (EpochEntry{3, 120}) {
		t.Fatalf("decode %v %v", back, err)
	}
}

func TestMetaProperties(t *testing.T) {
	fsys := vfs.NewMemFS()
	fsys.MkdirAll("/d", 0o755)
	mp := MetaProperties{Version: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", NodeID: 3, DirectoryID: "AAAAAAAAAAAAAAAAAAAAAQ"}
	if err := WriteMetaProperties(fsys, "/d", mp); err != nil {
		t.Fatal(err)
	}
	data, _ := vfs.ReadFile(fsys, "/d/meta.properties")
	text := string(data)
	for _, line := range []string{"version=1\n", "cluster.id=MkU3OEVBNTcwNTJENDM2Qg\n", "node.id=3\n", "directory.id=AAAAAAAAAAAAAAAAAAAAAQ\n"} {
		if !strings.Contains(text, line) {
			t.Fatalf("meta.properties lacks %q:\n%s", line, text)
		}
	}
	if !strings.HasPrefix(text, "#\n#") {
		t.Fatalf("no java.util.Properties header:\n%s", text)
	}
	back, err := ReadMetaProperties(fsys, "/d")
	if err != nil || back != mp {
		t.Fatalf("read back %+v %v", back, err)
	}
	// A file written by Kafka itself (with escaped colons in a comment
	// and other spacing) reads too.
	kafka := "#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id = 1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nversion=1\ncluster.id=4L6g3nShT-eMCtK--X86sw\n"
	vfs.WriteFileAtomic(fsys, "/d/meta.properties", []byte(kafka))
	back, err = ReadMetaProperties(fsys, "/d")
	if err != nil || back.NodeID != 1 || back.ClusterID != "4L6g3nShT-eMCtK--X86sw" {
		t.Fatalf("kafka file: %+v %v", back, err)
	}
	vfs.WriteFileAtomic(fsys, "/d/meta.properties", []byte("version=7\nnode.id=1\n"))
	if _, err := ReadMetaProperties(fsys, "/d"); err == nil {
		t.Fatal("unknown version accepted")
	}
}

func TestCleanShutdownMarkerFormat(t *testing.T) {
	if got := string(encodeCleanShutdown(17)); got != `{"version":0,"brokerEpoch":17}` {
		t.Fatalf("got %s", got)
	}
	if e, err := decodeCleanShutdown([]byte(`{"version":0,"brokerEpoch":-1}`)); err != nil || e != -1 {
		t.Fatalf("decode %d %v", e, err)
	}
}

func TestIndexFileFormats(t *testing.T) {
	fsys := vfs.NewMemFS()
	fsys.MkdirAll("/d", 0o755)
	oi, err := openIndexFile(fsys, segmentFile{"/d", 100, indexSuffix}, offsetIndexEntrySize, 100)
	if err != nil {
		t.Fatal(err)
	}
	off := &offsetIndex{indexFile: oi, baseOffset: 100}
	if oi.maxEntries != 12 {
		t.Fatalf("preallocated entries %d", oi.maxEntries)
	}
	off.append(fsys, 105, 4200)
	off.append(fsys, 110, 9000)
	if err := off.trim(fsys); err != nil {
		t.Fatal(err)
	}
	data, _ := vfs.ReadFile(fsys, "/d/00000000000000000100.index")
	want := []byte{0, 0, 0, 5, 0, 0, 0x10, 0x68, 0, 0, 0, 10, 0, 0, 0x23, 0x28}
	if string(data) != string(want) {
		t.Fatalf("offset index bytes % x", data)
	}
	if o, p := off.lookup(107); o != 105 || p != 4200 {
		t.Fatalf("lookup 107: %d %d", o, p)
	}
	if o, p := off.lookup(104); o != 100 || p != 0 {
		t.Fatalf("lookup below the first entry: %d %d", o, p)
	}
	oi.close()

	ti, err := openIndexFile(fsys, segmentFile{"/d", 100, timeIndexSuffix}, timeIndexEntrySize, 120)
	if err != nil {
		t.Fatal(err)
	}
	tix := &timeIndex{indexFile: ti, baseOffset: 100}
	tix.maybeAppend(fsys, 1000, 104, false)
	tix.maybeAppend(fsys, 999, 106, false) // not larger: skipped
	tix.maybeAppend(fsys, 2000, 109, false)
	tix.trim(fsys)
	data, _ = vfs.ReadFile(fsys, "/d/00000000000000000100.timeindex")
	var w []byte
	w = binary.BigEndian.AppendUint64(w, 1000)
	w = binary.BigEndian.AppendUint32(w, 4)
	w = binary.BigEndian.AppendUint64(w, 2000)
	w = binary.BigEndian.AppendUint32(w, 9)
	if string(data) != string(w) {
		t.Fatalf("time index bytes % x", data)
	}
	if ts, o := tix.lookup(1500); ts != 1000 || o != 104 {
		t.Fatalf("time lookup %d %d", ts, o)
	}
	if ts, o := tix.lookup(10); ts != -1 || o != 100 {
		t.Fatalf("time lookup below %d %d", ts, o)
	}
	ti.close()
}
