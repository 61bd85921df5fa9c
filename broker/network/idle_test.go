package network

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHandlerIdleFractionOverTheLastMinute(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := newHandlerIdle(t0)
	steps := []struct {
		name     string
		busy     time.Duration // handler time added before the scrape
		scrape   float64       // seconds since start-up
		capacity int
		want     float64
	}{
		{"first scrape, nothing handled: since start-up", 0, 30, 2, 1},
		{"15 s of handlers over the 30 s since the last scrape, 1 handler", 15 * time.Second, 60, 1, 0.5},
		{"the same 15 s with 2 handlers, from the oldest scrape of the minute", 0, 90, 2, 1 - 15.0/(2*60)},
		{"more busy than capacity floors at 0", 120 * time.Second, 100, 1, 0},
		{"no scrape in the last minute: since the last one", 0, 200, 2, 1},
		{"10 s of handlers over the 5 s since: floored", 10 * time.Second, 205, 1, 0},
	}
	for _, s := range steps {
		h.add(s.busy)
		if got := h.idleFraction(at(s.scrape), s.capacity); math.Abs(got-s.want) > 1e-9 {
			t.Fatalf("%s: idle fraction %v, want %v", s.name, got, s.want)
		}
	}
	for i := range 1000 {
		h.idleFraction(at(300+float64(i)), 2)
	}
	if n := len(h.marks); n > 62 {
		t.Fatalf("%d marks kept after scrapes every second, want the last minute's", n)
	}
}

// TestHandlerTimeCountsAgainstIdle: a handler that holds its connection's
// goroutine for 150 ms shows as that much busy time, and the idle
// fraction a scrape reads drops accordingly; the wait of an answer given
// from another goroutine (as acks=all and long polls answer) does not.
func TestHandlerTimeCountsAgainstIdle(t *testing.T) {
	const hold = 150 * time.Millisecond
	handlers := []*Handler{
		{Key: kmsg.Metadata, Min: 0, Max: 12, OnClient: true, Serve: func(_ context.Context, r *Request) {
			time.Sleep(hold)
			r.Respond(kmsg.NewPtrMetadataResponse())
		}},
		{Key: kmsg.DescribeCluster, Min: 0, Max: 1, OnClient: true, Serve: func(_ context.Context, r *Request) {
			go func() {
				time.Sleep(hold)
				r.Respond(kmsg.NewPtrDescribeClusterResponse())
			}()
		}},
	}
	s := NewServer(ServerOptions{Listeners: []ListenerSpec{{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: "PLAINTEXT"}}, MaxRequestSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)}, handlers)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx)
	defer s.Shutdown()
	c, err := net.Dial("tcp", s.Addrs()["PLAINTEXT"].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	roundTrip := func(req kmsg.Request, id int32) {
		t.Helper()
		frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("idle-test")).AppendRequest(nil, req, id)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatal(err)
		}
	}
	describe := kmsg.NewPtrDescribeClusterRequest()
	describe.Version = 0
	roundTrip(describe, 1)
	if busy := time.Duration(s.idle.busy.Load()); busy >= hold {
		t.Fatalf("an answer given from another goroutine counted %v of handler time", busy)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 1
	roundTrip(meta, 2)
	// The connection's goroutine counts the handler's time once the
	// handler returns, which may be just after its answer has reached
	// the client.
	deadline := time.Now().Add(5 * time.Second)
	for time.Duration(s.idle.busy.Load()) < hold && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	now := time.Now()
	busy := time.Duration(s.idle.busy.Load())
	if busy < hold || busy > now.Sub(start) {
		t.Fatalf("busy %v after a handler held its goroutine %v (%v since the first request)", busy, hold, now.Sub(start))
	}
	// One handler's capacity since the server was built: at most the
	// share of that time the handler did not hold.
	if idle, most := s.idle.idleFraction(now, 1), 1-float64(hold)/float64(now.Sub(s.idle.started)); idle > most+1e-9 {
		t.Fatalf("idle fraction %v, want at most %v", idle, most)
	}
}
