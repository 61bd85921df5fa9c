package storage

import (
	"fmt"
	"strconv"
	"time"
)

// ParseCleanerOptions reads the log cleaner's keys (log.cleaner.enable,
// .threads, .dedupe.buffer.size, .io.buffer.load.factor,
// .io.max.bytes.per.second, .backoff.ms) through value, which gives a key's
// effective value: the static one at start, and the dynamic broker configs
// over it at run time (Kafka reconfigures its cleaner when log.cleaner.*
// change cluster-wide or for this broker). A value that is not a number is
// an error naming its key.
func ParseCleanerOptions(value func(key string) string) (CleanerOptions, error) {
	var bad error
	num := func(key string) float64 {
		f, err := strconv.ParseFloat(value(key), 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("%s: %q is not a number", key, value(key))
		}
		return f
	}
	opts := CleanerOptions{
		Enable:              value("log.cleaner.enable") == "true",
		Threads:             int(num("log.cleaner.threads")),
		DedupeBufferSize:    int64(num("log.cleaner.dedupe.buffer.size")),
		IOBufferLoadFactor:  num("log.cleaner.io.buffer.load.factor"),
		IOMaxBytesPerSecond: num("log.cleaner.io.max.bytes.per.second"),
		Backoff:             time.Duration(num("log.cleaner.backoff.ms")) * time.Millisecond,
	}
	return opts, bad
}
