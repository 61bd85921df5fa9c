package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProbeApiVersions sends one ApiVersions v0 request to addr and returns the
// decoded response. v0 is the version every Kafka broker ever built answers
// without negotiation, which is what "ready" means for the harness.
func ProbeApiVersions(ctx context.Context, addr string) (*kmsg.ApiVersionsResponse, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	}

	const correlationID = 0x6772 // "gr"
	clientID := "gregor-harness"
	// Request header v1: api key, api version, correlation id, client id.
	body := make([]byte, 0, 32)
	body = binary.BigEndian.AppendUint16(body, 18) // ApiVersions
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint32(body, correlationID)
	body = binary.BigEndian.AppendUint16(body, uint16(len(clientID)))
	body = append(body, clientID...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	frame = append(frame, body...)
	if _, err := conn.Write(frame); err != nil {
		return nil, fmt.Errorf("writing ApiVersions: %w", err)
	}

	var sizeBuf [4]byte
	if _, err := io.ReadFull(conn, sizeBuf[:]); err != nil {
		return nil, fmt.Errorf("reading ApiVersions size: %w", err)
	}
	size := binary.BigEndian.Uint32(sizeBuf[:])
	if size < 4 || size > 1<<20 {
		return nil, fmt.Errorf("ApiVersions response size %d is implausible", size)
	}
	resp := make([]byte, size)
	if _, err := io.ReadFull(conn, resp); err != nil {
		return nil, fmt.Errorf("reading ApiVersions body: %w", err)
	}
	if got := binary.BigEndian.Uint32(resp); got != correlationID {
		return nil, fmt.Errorf("ApiVersions correlation id %d, want %d", got, correlationID)
	}
	var r kmsg.ApiVersionsResponse
	r.Version = 0
	if err := r.ReadFrom(resp[4:]); err != nil {
		return nil, fmt.Errorf("decoding ApiVersions v0 response: %w", err)
	}
	if r.ErrorCode != 0 {
		return &r, fmt.Errorf("ApiVersions error code %d", r.ErrorCode)
	}
	if len(r.ApiKeys) == 0 {
		return &r, errors.New("ApiVersions lists no API keys")
	}
	return &r, nil
}

// WaitReady polls ApiVersions on addr until it answers, the process exits
// (exited is closed), or ctx ends.
func WaitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := ProbeApiVersions(pctx, addr)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-exited:
			return fmt.Errorf("process exited before %s answered ApiVersions (last probe: %v)", addr, last)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer ApiVersions in time: %w (last probe: %v)", addr, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
