package main

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every component a child logger is made for in the node's code is one of
// loggerNames, so that kafka-configs --entity-type broker-loggers lists it
// from the start, and every name there is still used.
func TestLoggerNamesAreEveryComponent(t *testing.T) {
	component := regexp.MustCompile(`"component",\s*"([^"]+)"`)
	used := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Not the node: the test harness, benchmarks and caches.
			switch d.Name() {
			case "integration", "bench", ".cache", ".git", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range component.FindAllSubmatch(src, -1) {
			used[string(m[1])] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range used {
		if !slices.Contains(loggerNames, name) {
			t.Errorf("component %q (%s) is not in loggerNames", name, path)
		}
	}
	for _, name := range loggerNames {
		if _, ok := used[name]; !ok {
			t.Errorf("loggerNames names %q, which no code logs as", name)
		}
	}
}

// The node's logger starts at INFO for root and every component; raising
// one component to DEBUG lets its DEBUG records through and no other's.
func TestSettingsLoggerFollowsTheLevels(t *testing.T) {
	var out bytes.Buffer
	s, err := loadSettings("", []string{"gregor.log.format=json"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	levels := s.brokerOpts.LogLevels
	for _, l := range levels.Loggers() {
		if l.Level != slog.LevelInfo {
			t.Errorf("logger %s starts at %v", l.Name, l.Level)
		}
	}
	if len(levels.Loggers()) != len(loggerNames)+1 {
		t.Errorf("%d loggers, want root and %d components", len(levels.Loggers()), len(loggerNames))
	}
	levels.Set("replica", slog.LevelDebug)
	s.logger.With("component", "replica").Debug("replica debug")
	s.logger.With("component", "storage").Debug("storage debug")
	s.logger.Debug("root debug")
	s.brokerOpts.Server.RequestLogger.Debug("request debug")
	if got := out.String(); !strings.Contains(got, `"msg":"replica debug"`) || strings.Contains(got, "storage debug") ||
		strings.Contains(got, "root debug") || strings.Contains(got, "request debug") {
		t.Fatalf("output:\n%s", got)
	}
}
