package protocol

import (
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
