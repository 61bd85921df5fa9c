package integration

// Kafka Connect 4.3.1 workers as a target's clients: how a worker is
// started (distributed or standalone, from the connect Maven set, with the
// FileStream connectors on its class path), its REST API as the scenarios
// use it, the input file the source connector tails, and the checks of
// what came out at the other end. The connect/ scenarios share it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	mainConnectDistributed = "org.apache.kafka.connect.cli.ConnectDistributed"
	mainConnectStandalone  = "org.apache.kafka.connect.cli.ConnectStandalone"
	connectStringConverter = "org.apache.kafka.connect.storage.StringConverter"
	connectJSONConverter   = "org.apache.kafka.connect.json.JsonConverter"
)

// ConnectWorker is one Connect worker process. Its REST listener is on an
// address the caller claimed (ClaimLoopback), so that a restart after kill
// -9 comes back on the same worker id, which is the REST host:port.
type ConnectWorker struct {
	Name string // for logs and errors: "worker-1"
	Dir  string // properties, log and java.io.tmpdir
	Addr string // REST listener host:port, also the worker id in statuses
	// Properties is the worker config, written as given.
	Properties [][2]string
	// Main is mainConnectDistributed or mainConnectStandalone; Args come
	// after the worker properties file (a standalone worker's connector
	// files).
	Main string
	Args []string

	cmd  Cmd
	proc *Proc
	http http.Client
}

// LogPath is where the worker's output goes, restarts appended.
func (w *ConnectWorker) LogPath() string { return filepath.Join(w.Dir, w.Name+".log") }

// URL is the base of the worker's REST API.
func (w *ConnectWorker) URL() string { return "http://" + w.Addr }

// StartConnectWorker starts w in the background and waits until its REST
// API lists connectors, which a worker does only once it has joined its
// cluster and read the config topic (distributed) or started its
// connectors (standalone). The caller stops it.
func (t *Tools) StartConnectWorker(ctx context.Context, w *ConnectWorker, wait time.Duration) error {
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return err
	}
	props := filepath.Join(w.Dir, w.Name+".properties")
	if err := WriteProperties(props, w.Properties); err != nil {
		return err
	}
	// INFO to stdout: the log then shows the herder's rebalances, task
	// starts and the clients' errors.
	logCfg, err := t.Log4jConfig(true)
	if err != nil {
		return err
	}
	c, err := t.javaCmdLogging(ctx, SetConnect, "", logCfg, w.Main, append([]string{props}, w.Args...)...)
	if err != nil {
		return err
	}
	// The tools' 256 MiB heap is tight for a worker that runs a producer,
	// consumers and the REST server at once; the last -Xmx counts.
	c.Args = append([]string{"-Djava.io.tmpdir=" + w.Dir, "-Xmx512M"}, c.Args...)
	for i, a := range c.Args {
		if a == "-Xmx256M" {
			c.Args = slices.Delete(c.Args, i, i+1)
			break
		}
	}
	c.Dir = w.Dir
	w.cmd = c
	w.http = http.Client{Timeout: 30 * time.Second}
	return w.launch(ctx, wait)
}

func (w *ConnectWorker) launch(ctx context.Context, wait time.Duration) error {
	proc, err := Start(w.cmd, w.LogPath())
	if err != nil {
		return err
	}
	w.proc = proc
	err = until(ctx, wait, 500*time.Millisecond, func() (bool, error) {
		if exited, werr := proc.Exited(); exited {
			return false, fmt.Errorf("%s exited (%v) while starting: %s", w.Name, werr, proc.LogTail(6))
		}
		code, body, err := w.request(ctx, http.MethodGet, "/connectors", nil)
		if err != nil {
			return false, fmt.Errorf("%s's REST API at %s: %w", w.Name, w.Addr, err)
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("%s: GET /connectors answers %d: %s", w.Name, code, truncate(string(body), 300))
		}
		return true, nil
	})
	if err != nil {
		_ = proc.Stop(stopGrace)
		return fmt.Errorf("%s did not come up in %s: %w", w.Name, wait, err)
	}
	return nil
}

// Restart starts a killed worker again with the same properties.
func (w *ConnectWorker) Restart(ctx context.Context, wait time.Duration) error {
	if w.proc != nil {
		if exited, _ := w.proc.Exited(); !exited {
			return fmt.Errorf("%s is still running", w.Name)
		}
		_ = w.proc.Stop(0)
	}
	return w.launch(ctx, wait)
}

// Kill is kill -9 of the worker.
func (w *ConnectWorker) Kill() {
	if w.proc != nil {
		w.proc.Kill()
	}
}

// Stop ends the worker with SIGTERM (its shutdown hook stops the
// connectors and leaves the group), then SIGKILL after 30 s.
func (w *ConnectWorker) Stop() error {
	if w.proc == nil {
		return nil
	}
	return w.proc.Stop(30 * time.Second)
}

// Exited reports a worker that died on its own, with its log's tail.
func (w *ConnectWorker) Exited() error {
	if w.proc == nil {
		return fmt.Errorf("%s was never started", w.Name)
	}
	if exited, err := w.proc.Exited(); exited {
		return fmt.Errorf("%s exited (%v): %s", w.Name, err, w.proc.LogTail(6))
	}
	return nil
}

// request sends one REST request with a JSON body (nil for none).
func (w *ConnectWorker) request(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.URL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// restJSON sends a request, wants status want and decodes the answer into
// out (unless nil).
func (w *ConnectWorker) restJSON(ctx context.Context, method, path string, body any, want int, out any) error {
	code, b, err := w.request(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w", method, path, w.Name, err)
	}
	if code != want {
		return fmt.Errorf("%s %s on %s answered %d, want %d: %s", method, path, w.Name, code, want, truncate(string(b), 500))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s on %s: %w in %s", method, path, w.Name, err, truncate(string(b), 300))
	}
	return nil
}

// CreateConnector is POST /connectors.
func (w *ConnectWorker) CreateConnector(ctx context.Context, name string, config map[string]string) error {
	return w.restJSON(ctx, http.MethodPost, "/connectors", map[string]any{"name": name, "config": config}, http.StatusCreated, nil)
}

// connectorStatus is GET /connectors/<name>/status.
type connectorStatus struct {
	Name      string `json:"name"`
	Connector struct {
		State    string `json:"state"`
		WorkerID string `json:"worker_id"`
		Trace    string `json:"trace"`
	} `json:"connector"`
	Tasks []taskStatus `json:"tasks"`
	Type  string       `json:"type"`
}

type taskStatus struct {
	ID       int    `json:"id"`
	State    string `json:"state"`
	WorkerID string `json:"worker_id"`
	Trace    string `json:"trace"`
}

// String is the status in one line, the first line of a failure's trace
// included.
func (s connectorStatus) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s on %s", s.Name, s.Connector.State, s.Connector.WorkerID)
	if s.Connector.Trace != "" {
		fmt.Fprintf(&b, " (%s)", firstLine(s.Connector.Trace))
	}
	for _, t := range s.Tasks {
		fmt.Fprintf(&b, "; task %d %s on %s", t.ID, t.State, t.WorkerID)
		if t.Trace != "" {
			fmt.Fprintf(&b, " (%s)", firstLine(t.Trace))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

// running reports whether the connector and its tasks (as many as
// tasks) all run and, when worker is not "", all on that worker.
func (s connectorStatus) running(tasks int, worker string) bool {
	if s.Connector.State != "RUNNING" || len(s.Tasks) != tasks {
		return false
	}
	for _, t := range s.Tasks {
		if t.State != "RUNNING" || worker != "" && t.WorkerID != worker {
			return false
		}
	}
	return true
}

// failed names a FAILED connector or task, which Connect does not restart
// by itself.
func (s connectorStatus) failed() bool {
	if s.Connector.State == "FAILED" {
		return true
	}
	for _, t := range s.Tasks {
		if t.State == "FAILED" {
			return true
		}
	}
	return false
}

// Status is GET /connectors/<name>/status.
func (w *ConnectWorker) Status(ctx context.Context, name string) (connectorStatus, error) {
	var s connectorStatus
	err := w.restJSON(ctx, http.MethodGet, "/connectors/"+name+"/status", nil, http.StatusOK, &s)
	return s, err
}

// RestartConnector is POST /connectors/<name>/restart?includeTasks=true,
// which Connect answers 202 with the states it is restarting (KIP-745).
func (w *ConnectWorker) RestartConnector(ctx context.Context, name string) (connectorStatus, error) {
	var s connectorStatus
	err := w.restJSON(ctx, http.MethodPost, "/connectors/"+name+"/restart?includeTasks=true", nil, http.StatusAccepted, &s)
	return s, err
}

// connectorOffset is one partition's entry of GET
// /connectors/<name>/offsets (KIP-875), for a FileStream source: the
// file, and the byte position after the last line whose record was
// committed.
type connectorOffset struct {
	Partition map[string]any `json:"partition"`
	Offset    map[string]any `json:"offset"`
}

// FilePosition is the committed position of the FileStream source
// connector name in file, or -1 when the worker holds none.
func (w *ConnectWorker) FilePosition(ctx context.Context, name, file string) (int64, error) {
	var got struct {
		Offsets []connectorOffset `json:"offsets"`
	}
	if err := w.restJSON(ctx, http.MethodGet, "/connectors/"+name+"/offsets", nil, http.StatusOK, &got); err != nil {
		return 0, err
	}
	for _, o := range got.Offsets {
		if o.Partition["filename"] != file {
			continue
		}
		pos, ok := o.Offset["position"].(float64)
		if !ok {
			return 0, fmt.Errorf("%s's offset for %s has no numeric position: %v", name, file, o.Offset)
		}
		return int64(pos), nil
	}
	return -1, nil
}

// connectLine is line i of a source connector's input: all of the same
// length, so that a position in the file names a line.
func connectLine(i int) string { return fmt.Sprintf("connect-line-%08d", i) }

// connectLineBytes is the length of every input line, newline included.
var connectLineBytes = int64(len(connectLine(0)) + 1)

// lineAppender appends connectLine lines to a file, in whole lines, as a
// program that logs would: from a goroutine at a steady pace, or at once.
type lineAppender struct {
	path string

	mu      sync.Mutex
	written int // lines in the file
	stop    chan struct{}
	done    chan error
}

func newLineAppender(path string) (*lineAppender, error) {
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return nil, err
	}
	return &lineAppender{path: path}, nil
}

// Append writes the next n lines in one write.
func (a *lineAppender) Append(n int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for i := a.written; i < a.written+n; i++ {
		b.WriteString(connectLine(i))
		b.WriteByte('\n')
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	a.written += n
	return nil
}

// Written is how many lines the file holds.
func (a *lineAppender) Written() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.written
}

// Start appends n lines every interval until Stop.
func (a *lineAppender) Start(n int, interval time.Duration) {
	a.stop, a.done = make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-a.stop:
				a.done <- nil
				return
			case <-tick.C:
				if err := a.Append(n); err != nil {
					a.done <- err
					return
				}
			}
		}
	}()
}

// Stop ends the appending Start began and returns the lines written.
// Safe to call more than once, and without Start.
func (a *lineAppender) Stop() (int, error) {
	if a.stop != nil {
		close(a.stop)
		err := <-a.done
		a.stop = nil
		if err != nil {
			return a.Written(), fmt.Errorf("appending to %s: %w", a.path, err)
		}
	}
	return a.Written(), nil
}

// checkExactLines checks what a read_committed consumer read from the
// topic an exactly-once source wrote: lines 0..n-1, each once, in order.
// A line missing is a record the broker lost (or a transaction it aborted
// after committing); a line twice is an aborted transaction's record the
// consumer was shown, or a record written twice.
func checkExactLines(got []string, n int) error {
	seen := make(map[string]int, len(got))
	for _, l := range got {
		seen[l]++
	}
	var dup, missing, foreign []string
	for i := range n {
		switch c := seen[connectLine(i)]; {
		case c == 0:
			missing = append(missing, connectLine(i))
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s ×%d", connectLine(i), c))
		}
		delete(seen, connectLine(i))
	}
	for l := range seen {
		foreign = append(foreign, fmt.Sprintf("%q", l))
	}
	slices.Sort(foreign)
	if len(dup)+len(missing)+len(foreign) > 0 {
		return fmt.Errorf("%d records read for %d input lines: %d lines missing %s, %d read more than once %s, %d records that are no input line %s",
			len(got), n, len(missing), firstFew(missing), len(dup), firstFew(dup), len(foreign), firstFew(foreign))
	}
	for i, l := range got {
		if l != connectLine(i) {
			return fmt.Errorf("every line read once, but out of order: record %d is %s, want %s", i, l, connectLine(i))
		}
	}
	return nil
}

// scanSinkFile is scanCopies of a file's lines.
func scanSinkFile(content string) (next, repeated int, err error) {
	if content == "" {
		return 0, 0, nil
	}
	return scanCopies(strings.Split(strings.TrimSuffix(content, "\n"), "\n"), "the sink file")
}

// scanCopies reads an at-least-once copy of connectLine lines (what, for
// errors: a sink's file, a topic): next is how many of the input's first
// lines it holds, in input order by their first appearance (a task that
// starts again from its last committed offset repeats a run of lines it
// had copied, after them), and repeated how many lines are such repeats.
// A line that is no input line, or one copied before a line that comes
// before it in the input, is an error: a record changed, lost or out of
// order.
func scanCopies(lines []string, what string) (next, repeated int, err error) {
	for i, l := range lines {
		idx, ok := parseConnectLine(l)
		switch {
		case !ok:
			return next, repeated, fmt.Errorf("line %d of %s is %q, no input line", i+1, what, truncate(l, 100))
		case idx == next:
			next++
		case idx < next:
			repeated++
		default:
			return next, repeated, fmt.Errorf("line %d of %s is %s, before %s was ever copied: a record lost or out of order", i+1, what, l, connectLine(next))
		}
	}
	return next, repeated, nil
}

// parseConnectLine is the inverse of connectLine.
func parseConnectLine(l string) (int, bool) {
	rest, ok := strings.CutPrefix(l, "connect-line-")
	if !ok || len(l) != len(connectLine(0)) {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}

func firstFew(items []string) string {
	if len(items) == 0 {
		return ""
	}
	if len(items) > 4 {
		return "(" + strings.Join(items[:4], ", ") + ", …)"
	}
	return "(" + strings.Join(items, ", ") + ")"
}

// keyedRecord is one record the console consumer printed with print.key
// (key, tab, value; "null" for a null key or value).
type keyedRecord struct{ Key, Value string }

func parseKeyedRecords(out string) ([]keyedRecord, error) {
	var recs []keyedRecord
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		k, v, ok := strings.Cut(l, "\t")
		if !ok {
			return nil, fmt.Errorf("console consumer printed %q, want key<TAB>value", truncate(l, 200))
		}
		recs = append(recs, keyedRecord{Key: k, Value: v})
	}
	return recs, nil
}

// filePositions are the positions the offsets topic's records give the
// FileStream source connector's partition of file, in the order read
// (one key, so one partition, so log order). JsonConverter writes the
// key as ["<connector>",{"filename":"<file>"}] and the value as
// {"position":<n>}; a null value (a reset offset) is -1.
func filePositions(recs []keyedRecord, connector, file string) ([]int64, error) {
	var out []int64
	for _, r := range recs {
		var key []json.RawMessage
		if err := json.Unmarshal([]byte(r.Key), &key); err != nil || len(key) != 2 {
			continue // not a source offset (the worker writes nothing else, but a tool might)
		}
		var name string
		var part map[string]any
		if json.Unmarshal(key[0], &name) != nil || json.Unmarshal(key[1], &part) != nil || name != connector || part["filename"] != file {
			continue
		}
		if r.Value == "null" {
			out = append(out, -1)
			continue
		}
		var val struct {
			Position *int64 `json:"position"`
		}
		if err := json.Unmarshal([]byte(r.Value), &val); err != nil || val.Position == nil {
			return nil, fmt.Errorf("offset record %s has value %q, want {\"position\":<n>}", r.Key, r.Value)
		}
		out = append(out, *val.Position)
	}
	return out, nil
}
