package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeRequest builds a request frame body (no size prefix) as a client
// would: header then body.
func encodeRequest(req kmsg.Request, correlationID int32, clientID string) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func TestParseRequestRoundTrip(t *testing.T) {
	for _, v := range []int16{0, 9, 13} {
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(v)
		topic := "orders"
		m.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
		frame := encodeRequest(m, 42, "cli")
		key, ver, ok := PeekAPI(frame)
		if !ok || key != 3 || ver != v {
			t.Fatalf("peek: %d %d %v", key, ver, ok)
		}
		req := NewRequest(key, ver)
		hdr, body, err := ParseRequestHeader(frame, req.IsFlexible())
		if err != nil || hdr.CorrelationID != 42 || hdr.ClientID != "cli" || hdr.Flexible != (v >= 9) {
			t.Fatalf("v%d header %+v %v", v, hdr, err)
		}
		if err := req.ReadFrom(body); err != nil {
			t.Fatalf("v%d body: %v", v, err)
		}
		got := req.(*kmsg.MetadataRequest)
		if len(got.Topics) != 1 || *got.Topics[0].Topic != "orders" {
			t.Fatalf("v%d decoded %+v", v, got)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	var buf bytes.Buffer
	binary.Write(&buf, binary.BigEndian, int32(100))
	if _, err := ReadFrame(&buf, 10, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
	buf.Reset()
	binary.Write(&buf, binary.BigEndian, int32(-5))
	if _, err := ReadFrame(&buf, 10, nil); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("negative size: %v", err)
	}
	buf.Reset()
	binary.Write(&buf, binary.BigEndian, int32(4))
	buf.Write([]byte{1, 2})
	if _, err := ReadFrame(&buf, 10, nil); err == nil {
		t.Fatal("truncated frame accepted")
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(3)
	frame := AppendResponse(nil, 7, av)
	// ApiVersions always uses response header v0: size, correlation id,
	// then the body directly (error code 0).
	if binary.BigEndian.Uint32(frame) != uint32(len(frame)-4) || binary.BigEndian.Uint32(frame[4:]) != 7 || frame[8] != 0 || frame[9] != 0 {
		t.Fatalf("bad ApiVersions frame % x", frame[:10])
	}
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	frame = AppendResponse(nil, 9, md)
	body := frame[9:] // size, correlation id, empty tag section
	got := kmsg.NewPtrMetadataResponse()
	got.SetVersion(12)
	if frame[8] != 0 || got.ReadFrom(body) != nil {
		t.Fatalf("flexible header not written")
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.Add(kmsg.Produce, 0, 13)
	r.Add(kmsg.ApiVersions, 0, 4)
	if !r.Serves(0, 13) || r.Serves(0, 14) || r.Serves(1, 4) {
		t.Fatal("Serves wrong")
	}
	keys := r.APIKeys()
	if len(keys) != 2 || keys[0].ApiKey != 0 || keys[1].ApiKey != 18 {
		t.Fatalf("keys %+v", keys)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering beyond kmsg's versions must panic")
		}
	}()
	r.Add(kmsg.Fetch, 0, 99)
}

// FuzzParseRequest feeds arbitrary frames through the decode path a
// connection uses: it may fail, never panic.
func FuzzParseRequest(f *testing.F) {
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(12)
	f.Add(encodeRequest(m, 1, "x"))
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{1, 2, 3}}}}}
	f.Add(encodeRequest(p, 2, ""))
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(13)
	f.Add(encodeRequest(fr, 3, "c"))
	f.Add([]byte{0, 18, 0, 9, 0, 0, 0, 1, 255, 255})
	f.Fuzz(func(t *testing.T, frame []byte) {
		key, ver, ok := PeekAPI(frame)
		if !ok {
			return
		}
		req := NewRequest(key, ver)
		flexible := req != nil && req.IsFlexible()
		_, body, err := ParseRequestHeader(frame, flexible)
		if err != nil || req == nil {
			return
		}
		_ = req.ReadFrom(body)
	})
}

func TestReadFrameLargeFrameGrowsWithData(t *testing.T) {
	payload := bytes.Repeat([]byte{7}, 5<<20+3)
	var buf bytes.Buffer
	binary.Write(&buf, binary.BigEndian, int32(len(payload)))
	buf.Write(payload)
	got, err := ReadFrame(&buf, 10<<20, nil)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("large frame: %v, %d bytes", err, len(got))
	}
	buf.Reset()
	binary.Write(&buf, binary.BigEndian, int32(8<<20))
	buf.Write(payload[:100])
	if _, err := ReadFrame(&buf, 10<<20, nil); err == nil {
		t.Fatal("short large frame accepted")
	}
}

func TestFrameClasses(t *testing.T) {
	for _, c := range []struct{ n, class, newCap int }{
		{0, -1, 0},
		{32 << 10, -1, 32 << 10},
		{32<<10 + 1, 16, 64 << 10},
		{64 << 10, 16, 64 << 10},
		{64<<10 + 1, 17, 128 << 10},
		{1 << 20, 20, 1 << 20},
		{16 << 20, 24, 16 << 20},
		{16<<20 + 1, -1, 16<<20 + 1},
	} {
		if got := frameClass(c.n); got != c.class {
			t.Errorf("frameClass(%d) = %d, want %d", c.n, got, c.class)
		}
		if got := pooledCap(c.n); got != c.newCap {
			t.Errorf("pooledCap(%d) = %d, want %d", c.n, got, c.newCap)
		}
	}
}

// frameBytes is a size-prefixed frame of n bytes of fill.
func frameBytes(n int, fill byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, uint32(n))
	return append(f, bytes.Repeat([]byte{fill}, n)...)
}

func TestReadPooledFrame(t *testing.T) {
	var pool FramePool
	for _, n := range []int{10, 100 << 10, 3<<20 + 5} {
		got, err := ReadPooledFrame(bytes.NewReader(frameBytes(n, 1)), 10<<20, &pool)
		if err != nil || len(got) != n || got[n-1] != 1 {
			t.Fatalf("%d bytes: %v, got %d", n, err, len(got))
		}
		if n > 32<<10 && cap(got) != 1<<frameClass(n) {
			t.Fatalf("%d bytes: capacity %d, want its class size", n, cap(got))
		}
		// Once given back, the buffer serves the next frame of its
		// class, which overwrites it exactly.
		pool.Put(got)
		again, err := ReadPooledFrame(bytes.NewReader(frameBytes(n-1, 2)), 10<<20, &pool)
		if err != nil || len(again) != n-1 || again[0] != 2 || again[n-2] != 2 {
			t.Fatalf("%d bytes again: %v", n, err)
		}
		if n > 32<<10 && !raceEnabled && &again[0] != &got[0] {
			t.Fatalf("%d bytes: the pooled buffer was not reused", n)
		}
	}
	// Capacities the pool does not keep are dropped, not misfiled.
	pool.Put(make([]byte, 10))
	pool.Put(make([]byte, 0, 64<<20))
	if b := pool.get(40 << 10); b != nil && cap(b) < 40<<10 {
		t.Fatalf("a %d-byte buffer for a 40 KiB frame", cap(b))
	}
	// Errors are ReadFrame's.
	if _, err := ReadPooledFrame(bytes.NewReader(frameBytes(100, 0)), 10, &pool); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	if _, err := ReadPooledFrame(bytes.NewReader(frameBytes(100<<10, 0)[:50<<10]), 10<<20, &pool); err == nil {
		t.Fatal("short frame accepted")
	}
}

func TestReadPooledFrameAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	var pool FramePool
	frame := frameBytes(1<<20, 3)
	// A connection reads through a bufio.Reader, whose Peek spares the
	// size prefix an allocation.
	src := bytes.NewReader(frame)
	r := bufio.NewReaderSize(src, 64<<10)
	read := func() {
		src.Reset(frame)
		r.Reset(src)
		got, err := ReadPooledFrame(r, 10<<20, &pool)
		if err != nil {
			t.Fatal(err)
		}
		pool.Put(got)
	}
	read()
	if allocs := testing.AllocsPerRun(100, read); allocs != 0 {
		t.Fatalf("%v allocations per pooled frame", allocs)
	}
}
