package metrics

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The process series come from the kernel and the runtime: CPU time and
// heap allocations only grow, and the descriptor count is at least the
// three standard streams.
func TestProcessMetricsReadTheProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	r := NewRegistry()
	r.RegisterProcess()
	scrape := func() map[string]float64 {
		var b bytes.Buffer
		if err := r.Write(&b, false); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, line := range strings.Split(b.String(), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			var name string
			var v float64
			if _, err := fmt.Sscan(line, &name, &v); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			out[name] = v
		}
		return out
	}
	first := scrape()
	sink := make([][]byte, 0, 64)
	for range 64 {
		sink = append(sink, make([]byte, 1<<16))
	}
	_ = sink
	second := scrape()
	for _, d := range []*Desc{ProcessCPUSeconds, ProcessResidentMemory, ProcessVirtualMemory, ProcessOpenFDs, ProcessMaxFDs,
		ProcessStartTime, GoGoroutines, GoAllocBytes, GoHeapInUse, GoSysBytes, GoStackInUse} {
		if second[d.Name] <= 0 {
			t.Errorf("%s = %v", d.Name, second[d.Name])
		}
	}
	if second[GoAllocBytes.Name]-first[GoAllocBytes.Name] < 64<<16 {
		t.Errorf("allocations grew by %v bytes across 4 MiB of allocations", second[GoAllocBytes.Name]-first[GoAllocBytes.Name])
	}
	if second[ProcessOpenFDs.Name] < 3 || second[ProcessMaxFDs.Name] < second[ProcessOpenFDs.Name] {
		t.Errorf("open fds %v, max %v", second[ProcessOpenFDs.Name], second[ProcessMaxFDs.Name])
	}
	if second[ProcessStartTime.Name] != first[ProcessStartTime.Name] {
		t.Errorf("start time moved")
	}
}
