package storage

import (
	"strings"
	"testing"
	"time"
)

func TestParseCleanerOptions(t *testing.T) {
	keys := map[string]string{
		"log.cleaner.enable":                  "true",
		"log.cleaner.threads":                 "2",
		"log.cleaner.dedupe.buffer.size":      "1048576",
		"log.cleaner.io.buffer.load.factor":   "0.5",
		"log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308",
		"log.cleaner.backoff.ms":              "250",
	}
	value := func(key string) string { return keys[key] }
	got, err := ParseCleanerOptions(value)
	want := CleanerOptions{Enable: true, Threads: 2, DedupeBufferSize: 1 << 20, IOBufferLoadFactor: 0.5,
		IOMaxBytesPerSecond: DefaultCleanerOptions().IOMaxBytesPerSecond, Backoff: 250 * time.Millisecond}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	keys["log.cleaner.threads"] = "two"
	if _, err := ParseCleanerOptions(value); err == nil || !strings.Contains(err.Error(), "log.cleaner.threads") {
		t.Fatalf("a threads value that is no number: %v", err)
	}
}
