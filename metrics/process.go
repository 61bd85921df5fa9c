package metrics

import (
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The process and the Go runtime, under the names Prometheus' client
// libraries give them: the JMX exporter's Java agent serves the same
// process_* series for a Kafka broker, so a dashboard's CPU, memory and
// file-descriptor panels work for both. They are read at each scrape from
// the kernel (/proc, getrusage, getrlimit) and the Go runtime; on a system
// without /proc the memory and descriptor series are left out.
var (
	ProcessCPUSeconds = &Desc{Name: "process_cpu_seconds_total", Kind: CounterKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "User and system CPU time the process has used, in seconds."}
	ProcessResidentMemory = &Desc{Name: "process_resident_memory_bytes", Kind: GaugeKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "Resident memory of the process, in bytes."}
	ProcessVirtualMemory = &Desc{Name: "process_virtual_memory_bytes", Kind: GaugeKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "Virtual memory of the process, in bytes (mmap'ed index files included)."}
	ProcessOpenFDs = &Desc{Name: "process_open_fds", Kind: GaugeKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "File descriptors the process has open (segment files, sockets)."}
	ProcessMaxFDs = &Desc{Name: "process_max_fds", Kind: GaugeKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "The process's limit on open file descriptors (RLIMIT_NOFILE)."}
	ProcessStartTime = &Desc{Name: "process_start_time_seconds", Kind: GaugeKind,
		MBean: "none: the Prometheus process collector (the JMX exporter's agent serves it for Kafka)",
		Help:  "When the node's metrics registry was created, early in start-up, in seconds since the Unix epoch."}
	GoGoroutines = &Desc{Name: "go_goroutines", Kind: GaugeKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name; Kafka's JVM has jvm_threads_current)",
		Help:  "Goroutines that exist."}
	GoAllocBytes = &Desc{Name: "go_memstats_alloc_bytes_total", Kind: CounterKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name)",
		Help:  "Bytes of heap memory allocated since the process started (what a scrape or a request costs shows as its growth)."}
	GoHeapInUse = &Desc{Name: "go_memstats_heap_inuse_bytes", Kind: GaugeKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name; Kafka's JVM has jvm_memory_bytes_used{area=\"heap\"})",
		Help:  "Bytes in heap spans in use."}
	GoSysBytes = &Desc{Name: "go_memstats_sys_bytes", Kind: GaugeKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name)",
		Help:  "Bytes of memory the Go runtime has mapped from the operating system, for the heap, stacks and its own structures."}
	GoHeapReleased = &Desc{Name: "go_memstats_heap_released_bytes", Kind: GaugeKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name)",
		Help:  "Bytes of the heap returned to the operating system (mapped but not resident); go_memstats_sys_bytes less this bounds the runtime's share of the resident memory."}
	GoStackInUse = &Desc{Name: "go_memstats_stack_inuse_bytes", Kind: GaugeKind,
		MBean: "none: the Go runtime (Prometheus' Go collector name)",
		Help:  "Bytes of goroutine stacks in use."}
	GoGCCycles = &Desc{Name: "go_gc_cycles_total", Kind: CounterKind,
		MBean: "none: the Go runtime",
		Help:  "Garbage collection cycles completed."}
)

// RegisterProcess registers the process and Go runtime metrics.
func (r *Registry) RegisterProcess() {
	started := float64(time.Now().UnixNano()) / 1e9
	page := float64(os.Getpagesize())
	r.Gauge(ProcessStartTime, func() float64 { return started })
	r.Collect(ProcessCPUSeconds, func(emit *Emit) {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			emit.Add(tvSeconds(ru.Utime) + tvSeconds(ru.Stime))
		}
	})
	r.Collect(ProcessResidentMemory, func(emit *Emit) {
		if f := statm(); len(f) > 1 {
			emit.Add(f[1] * page)
		}
	})
	r.Collect(ProcessVirtualMemory, func(emit *Emit) {
		if f := statm(); len(f) > 0 {
			emit.Add(f[0] * page)
		}
	})
	r.Collect(ProcessOpenFDs, func(emit *Emit) {
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			emit.Add(float64(len(fds)))
		}
	})
	r.Collect(ProcessMaxFDs, func(emit *Emit) {
		var lim syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
			emit.Add(float64(lim.Cur))
		}
	})
	r.Gauge(GoGoroutines, func() float64 { return float64(runtime.NumGoroutine()) })
	r.Gauge(GoAllocBytes, func() float64 { return runtimeValue("/gc/heap/allocs:bytes") })
	r.Gauge(GoHeapInUse, func() float64 {
		return runtimeValue("/memory/classes/heap/objects:bytes") + runtimeValue("/memory/classes/heap/unused:bytes")
	})
	r.Gauge(GoSysBytes, func() float64 { return runtimeValue("/memory/classes/total:bytes") })
	r.Gauge(GoHeapReleased, func() float64 { return runtimeValue("/memory/classes/heap/released:bytes") })
	r.Gauge(GoStackInUse, func() float64 { return runtimeValue("/memory/classes/heap/stacks:bytes") })
	r.Gauge(GoGCCycles, func() float64 { return runtimeValue("/gc/cycles/total:gc-cycles") })
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// statm is /proc/self/statm's fields (sizes in pages), nil without /proc.
func statm() []float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// runtimeValue reads one of the Go runtime's metrics (runtime/metrics).
func runtimeValue(name string) float64 {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	switch s[0].Value.Kind() {
	case rtmetrics.KindUint64:
		return float64(s[0].Value.Uint64())
	case rtmetrics.KindFloat64:
		return s[0].Value.Float64()
	}
	return 0
}
