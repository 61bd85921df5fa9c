package bench

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var producerPerfRe = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)`)

// parseProducerPerf reads the final summary line of ProducerPerformance.
func parseProducerPerf(out string) (throughputResult, error) {
	m := producerPerfRe.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return throughputResult{}, fmt.Errorf("no summary line in producer perf output: %q", lastLine(out))
	}
	last := m[len(m)-1]
	rps, err1 := strconv.ParseFloat(last[2], 64)
	mbs, err2 := strconv.ParseFloat(last[3], 64)
	if err1 != nil || err2 != nil {
		return throughputResult{}, fmt.Errorf("bad producer perf summary %q", last[0])
	}
	return throughputResult{RecordsPerSec: rps, MBPerSec: mbs}, nil
}

// parseConsumerPerf reads ConsumerPerformance's CSV line and returns the
// fetch-only rates (fetch.nMsg.sec, fetch.MB.sec), which leave out the time
// spent joining the group.
func parseConsumerPerf(out string) (throughputResult, error) {
	var header []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Split(line, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(fields) > 1 && fields[0] == "start.time" {
			header = fields
			continue
		}
		if header == nil || len(fields) != len(header) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = fields[i]
		}
		rps, err1 := strconv.ParseFloat(row["fetch.nMsg.sec"], 64)
		mbs, err2 := strconv.ParseFloat(row["fetch.MB.sec"], 64)
		n, err3 := strconv.ParseInt(row["data.consumed.in.nMsg"], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return throughputResult{}, fmt.Errorf("bad consumer perf line %q", line)
		}
		if n == 0 {
			return throughputResult{}, fmt.Errorf("consumer perf test consumed nothing")
		}
		return throughputResult{RecordsPerSec: rps, MBPerSec: mbs}, nil
	}
	return throughputResult{}, fmt.Errorf("no CSV result in consumer perf output: %q", lastLine(out))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc on every
// architecture Gregor runs on.
const clockTicks = 100

// cpuSeconds is the user+system CPU time of process pid (all threads).
func cpuSeconds(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name in parentheses may hold spaces.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndex(stat, ")")
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line")
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q", f[11], f[12])
	}
	return (u + s) / clockTicks, nil
}

// peakRSSMiB is VmHWM of process pid.
func peakRSSMiB(pid int) (float64, error) { return statusMiB(pid, "VmHWM:") }

// rssMiB is the current VmRSS of process pid.
func rssMiB(pid int) (float64, error) { return statusMiB(pid, "VmRSS:") }

func statusMiB(pid int, field string) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(string(b), field)
}

func parseVmHWM(status string) (float64, error) { return parseStatusKiB(status, "VmHWM:") }

// parseStatusKiB reads a "Field:  N kB" line of /proc/<pid>/status, in MiB.
func parseStatusKiB(status, field string) (float64, error) {
	for _, line := range strings.Split(status, "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					return 0, err
				}
				return kb / 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", strings.TrimSuffix(field, ":"))
}

// CPUSeconds is the user+system CPU time of process pid, for the
// benchmark commands of their own (bench/cmd/metricscost).
func CPUSeconds(pid int) (float64, error) { return cpuSeconds(pid) }

// LoadAvg is the machine's 1, 5 and 15 minute load averages.
func LoadAvg() string { return loadAvg() }
