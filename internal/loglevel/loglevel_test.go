package loglevel

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// newLogger is a text logger through a registry whose root is at INFO.
func newLogger(names ...string) (*Registry, *slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	reg := New(slog.LevelInfo, names...)
	inner := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: LevelTrace})
	return reg, slog.New(reg.Handler(inner)), &buf
}

func TestComponentLevelsFallBackToRoot(t *testing.T) {
	reg, root, buf := newLogger("replica", "storage")
	replica := root.With("component", "replica", "node", 1)
	storage := root.With("component", "storage")

	replica.Debug("replica debug 1")
	storage.Debug("storage debug 1")
	root.Debug("root debug 1")
	reg.Set("replica", slog.LevelDebug)
	replica.Debug("replica debug 2")
	replica.Log(context.Background(), LevelTrace, "replica trace 2")
	storage.Debug("storage debug 2")
	root.Info("root info 2")
	reg.Set(Root, slog.LevelError)
	storage.Info("storage info 3")
	replica.Debug("replica debug 3")
	reg.Unset("replica")
	replica.Warn("replica warn 4")
	replica.Error("replica error 4")

	got := buf.String()
	for _, want := range []string{"replica debug 2", "root info 2", "replica debug 3", "replica error 4"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q not logged:\n%s", want, got)
		}
	}
	for _, not := range []string{"debug 1", "storage debug 2", "replica trace 2", "storage info 3", "replica warn 4"} {
		if strings.Contains(got, not) {
			t.Errorf("%q logged:\n%s", not, got)
		}
	}
}

func TestLoggersListsRootFirstWithEffectiveLevels(t *testing.T) {
	reg, root, _ := newLogger("storage", "controller")
	reg.Set("storage", LevelTrace)
	// A component met first in a With becomes a logger.
	root.With("component", "late")
	got := reg.Loggers()
	want := []Logger{{Root, slog.LevelInfo}, {"controller", slog.LevelInfo}, {"late", slog.LevelInfo}, {"storage", LevelTrace}}
	if len(got) != len(want) {
		t.Fatalf("Loggers() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Loggers() = %v, want %v", got, want)
		}
	}
	if !reg.Exists("late") || reg.Exists("unknown") || !reg.Exists(Root) {
		t.Fatal("Exists is wrong")
	}
	if l, ok := reg.Level("storage"); !ok || l != LevelTrace {
		t.Fatalf("Level(storage) = %v %v", l, ok)
	}
	if _, ok := reg.Level("unknown"); ok {
		t.Fatal("Level of an unknown logger")
	}
	reg.Unset(Root)
	if l, _ := reg.Level(Root); l != slog.LevelInfo {
		t.Fatalf("Unset(root) changed root to %v", l)
	}
}

// A component inside a group is the group's attribute, not the logger's
// name; a later With outside groups names a more specific logger.
func TestGroupsAndNesting(t *testing.T) {
	reg, root, buf := newLogger("a", "b")
	reg.Set("a", slog.LevelDebug)
	grouped := root.With("component", "a").WithGroup("g").With("component", "b")
	grouped.Debug("grouped debug")
	nested := root.With("component", "b").With("component", "a")
	nested.Debug("nested debug")
	root.WithGroup("").With("component", "a").Debug("empty group debug")
	// Not a string: not a logger name.
	root.With("component", 7).Debug("number debug")
	got := buf.String()
	for _, want := range []string{"grouped debug", "g.component=b", "nested debug", "empty group debug"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q not logged:\n%s", want, got)
		}
	}
	if strings.Contains(got, "number debug") {
		t.Errorf("number debug logged:\n%s", got)
	}
}

func TestLevelNames(t *testing.T) {
	for _, n := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"} {
		l, ok := ParseLevel(n)
		if !ok || LevelName(l) != n {
			t.Errorf("%s: parsed %v %v, named %s", n, l, ok, LevelName(l))
		}
	}
	for _, bad := range []string{"debug", "Info", "ALL", ""} {
		if _, ok := ParseLevel(bad); ok {
			t.Errorf("ParseLevel(%q) accepted", bad)
		}
	}
	// A level between two names lets through what the higher one does.
	if LevelName(slog.LevelInfo-2) != "INFO" || LevelName(LevelTrace-10) != "TRACE" || LevelName(LevelFatal+1) != "OFF" {
		t.Error("LevelName between levels")
	}
}

// Levels change while other goroutines log (run with -race).
func TestConcurrentSetAndLog(t *testing.T) {
	reg, root, _ := newLogger("x")
	x := root.With("component", "x")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				if i == 0 && j%2 == 0 {
					reg.Set("x", slog.LevelDebug)
				} else if i == 0 {
					reg.Unset("x")
				}
				x.Debug("d")
				root.With("component", "y").Info("i")
				_ = reg.Loggers()
			}
		}()
	}
	wg.Wait()
}
