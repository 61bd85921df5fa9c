// Package loglevel holds a node's logger levels, changed at run time
// (KIP-412's BROKER_LOGGER resources): a slog.Handler wrapper that decides
// per record whether it is logged from the level of the record's logger,
// and the registry of those levels.
//
// A logger is named by the "component" attribute a child logger is made
// with (logger.With("component", "replica")); a logger without one is the
// root logger, named "root" as in Kafka. A logger without a level of its
// own uses root's. The component must be set with With, not on a single
// log call: the level is decided before a call's attributes are looked at.
//
// Levels are Kafka's log4j names mapped to slog levels: TRACE is
// slog.LevelDebug-4, DEBUG, INFO, WARN and ERROR are slog's, FATAL is
// slog.LevelError+4, and OFF is above every level. Levels live in memory
// only: a restart returns to the configured ones, as in Kafka.
package loglevel

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Root is the root logger's name.
const Root = "root"

// Key is the attribute that names a child logger.
const Key = "component"

// Kafka's levels as slog levels.
const (
	LevelTrace = slog.LevelDebug - 4
	LevelFatal = slog.LevelError + 4
	// LevelOff enables nothing: no record is logged at it.
	LevelOff = slog.Level(math.MaxInt32)
)

// levelNames are Kafka's names in increasing order of level.
var levelNames = []struct {
	name  string
	level slog.Level
}{
	{"TRACE", LevelTrace},
	{"DEBUG", slog.LevelDebug},
	{"INFO", slog.LevelInfo},
	{"WARN", slog.LevelWarn},
	{"ERROR", slog.LevelError},
	{"FATAL", LevelFatal},
	{"OFF", LevelOff},
}

// ParseLevel is the slog level of one of Kafka's level names, which are
// case-sensitive as Kafka checks them; OFF is a level, though Kafka's
// IncrementalAlterConfigs refuses to set it.
func ParseLevel(name string) (slog.Level, bool) {
	for _, n := range levelNames {
		if n.name == name {
			return n.level, true
		}
	}
	return 0, false
}

// LevelName is Kafka's name of the lowest level that lets through the same
// records as l does.
func LevelName(l slog.Level) string {
	for _, n := range levelNames {
		if l <= n.level {
			return n.name
		}
	}
	return "OFF"
}

// inherit marks a logger without a level of its own.
const inherit = math.MinInt64

// cell is one logger's level; root's is never inherit.
type cell struct{ level atomic.Int64 }

// Registry is a node's loggers and their levels. Its methods are safe for
// concurrent use; deciding whether a record is logged takes at most two
// atomic loads.
type Registry struct {
	root cell
	mu   sync.Mutex
	// cells are the named loggers; a cell, once made, is kept, so that
	// handlers may hold it.
	cells map[string]*cell
}

// New is a registry whose root logger has level root, with the named
// loggers (Gregor's components) known from the start, so that they can be
// described and set before they first log. Other names become loggers
// when a handler is given them.
func New(root slog.Level, names ...string) *Registry {
	r := &Registry{cells: map[string]*cell{}}
	r.root.level.Store(int64(root))
	for _, n := range names {
		r.cellOf(n)
	}
	return r
}

// cellOf is the named logger's cell, made (inheriting) on first use.
func (r *Registry) cellOf(name string) *cell {
	if name == Root {
		return &r.root
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cells[name]
	if c == nil {
		c = &cell{}
		c.level.Store(inherit)
		r.cells[name] = c
	}
	return c
}

// effective is c's level, or root's when c has none.
func (r *Registry) effective(c *cell) slog.Level {
	if c != nil {
		if v := c.level.Load(); v != inherit {
			return slog.Level(v)
		}
	}
	return slog.Level(r.root.level.Load())
}

// Exists reports whether name is a logger of the registry.
func (r *Registry) Exists(name string) bool {
	if name == Root {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cells[name] != nil
}

// Logger is a logger's name and effective level.
type Logger struct {
	Name  string
	Level slog.Level
}

// Loggers are every logger with its effective level, root first and the
// others by name.
func (r *Registry) Loggers() []Logger {
	r.mu.Lock()
	names := make([]string, 0, len(r.cells))
	cells := make(map[string]*cell, len(r.cells))
	for n, c := range r.cells {
		names = append(names, n)
		cells[n] = c
	}
	r.mu.Unlock()
	slices.Sort(names)
	out := []Logger{{Root, r.effective(nil)}}
	for _, n := range names {
		out = append(out, Logger{n, r.effective(cells[n])})
	}
	return out
}

// Level is the named logger's effective level; false if there is no such
// logger.
func (r *Registry) Level(name string) (slog.Level, bool) {
	if !r.Exists(name) {
		return 0, false
	}
	return r.effective(r.cellOf(name)), true
}

// Set gives the named logger level l, making the logger if it is new.
func (r *Registry) Set(name string, l slog.Level) {
	r.cellOf(name).level.Store(int64(l))
}

// Unset makes the named logger use root's level again. Root keeps its
// level: it has nothing to fall back to.
func (r *Registry) Unset(name string) {
	if name == Root || !r.Exists(name) {
		return
	}
	r.cellOf(name).level.Store(inherit)
}

// Handler wraps inner so that a record is logged when its level is at
// least its logger's. inner's own level is not consulted: make it with
// the lowest level (LevelTrace or below) so that it keeps what this lets
// through.
func (r *Registry) Handler(inner slog.Handler) slog.Handler {
	return &handler{inner: inner, reg: r}
}

// handler is Registry.Handler's: inner, with the level of the logger its
// attributes name.
type handler struct {
	inner slog.Handler
	reg   *Registry
	// cell is the logger's, nil for root.
	cell *cell
	// grouped: a group is open, so attributes added from now on are the
	// group's and cannot name the logger.
	grouped bool
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.reg.effective(h.cell)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	return h.inner.Handle(ctx, rec)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(attrs)
	if !h.grouped {
		// The last component wins, as later With calls name a more
		// specific logger.
		for _, a := range attrs {
			if a.Key != Key {
				continue
			}
			if v := a.Value.Resolve(); v.Kind() == slog.KindString {
				c.cell = h.reg.cellOf(v.String())
			}
		}
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		// slog's rule: an empty group changes nothing.
		return h
	}
	c := *h
	c.inner = h.inner.WithGroup(name)
	c.grouped = true
	return &c
}
