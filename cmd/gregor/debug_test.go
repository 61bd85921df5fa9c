package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The HTTP listener: the key, else GREGOR_PPROF_ADDR, else the dev mode's
// 127.0.0.1:9644 (optional) when gregor runs with no file and no override.
func TestHTTPListenerAddr(t *testing.T) {
	t.Setenv("GREGOR_PPROF_ADDR", "")
	for _, tc := range []struct {
		overrides []string
		env       string
		addr      string
		optional  bool
	}{
		{nil, "", devHTTPListener, true},
		{[]string{"num.partitions=3"}, "", "", false},
		{[]string{"gregor.http.listener=127.0.0.1:0"}, "", "127.0.0.1:0", false},
		{[]string{"num.partitions=3"}, "127.0.0.1:6060", "127.0.0.1:6060", false},
		{[]string{"gregor.http.listener=127.0.0.1:0"}, "127.0.0.1:6060", "127.0.0.1:0", false},
	} {
		t.Setenv("GREGOR_PPROF_ADDR", tc.env)
		s, err := loadSettings("", tc.overrides, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if addr, optional := httpListenerAddr(s, s.logger); addr != tc.addr || optional != tc.optional {
			t.Errorf("%v with GREGOR_PPROF_ADDR=%q: %q optional %v, want %q %v", tc.overrides, tc.env, addr, optional, tc.addr, tc.optional)
		}
	}
}

// gregor.log.format=json logs one JSON object a line, start-up warnings
// included.
func TestJSONLogs(t *testing.T) {
	var out bytes.Buffer
	s, err := loadSettings("", []string{"gregor.log.format=json", "no.such.key=1"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	s.logger.Info("hello", "k", "v")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log:\n%s", out.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
	}
	if !strings.Contains(out.String(), "no.such.key") || !strings.Contains(out.String(), `"msg":"hello"`) {
		t.Fatalf("log:\n%s", out.String())
	}
}
