// Command teeth checks that the crash tests guard every fsync: for each
// call of Sync, SyncDir or SyncFS (and of the storage package's sync wrappers) in
// the files that make data durable, it builds the tests with that one call
// replaced by a no-op (through go test -overlay, so the tree is never
// edited) and runs them. A call whose removal no test notices is reported
// as not caught, and the command exits with status 1.
//
// Run it from the module root, niced (it runs the tests once per call
// site):
//
//	nice go run ./vfs/teeth
//	nice go run ./vfs/teeth -run 'Crash|Recover' -sites raftlog
//
// The output is a Markdown table: call site, the call, and the tests that
// failed without it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// targets are the files whose durability calls are checked, with the
// packages whose tests are run for them (the file's own package first).
var targets = []struct {
	glob string
	pkgs []string
}{
	{"storage/*.go", []string{"./storage"}},
	{"tiered/*.go", []string{"./tiered"}},
	{"controller/raftlog/*.go", []string{"./controller/raftlog", "./controller"}},
	{"controller/format.go", []string{"./controller"}},
	{"vfs/fs.go", []string{"./vfs", "./storage", "./controller/raftlog", "./controller"}},
}

// site is one call to disable.
type site struct {
	file       string // relative to the module root
	line       int
	call       string // source text of the call
	start, end int    // byte offsets of the call in the file
	operands   string // source text of the receiver and the arguments
	pkgs       []string
}

// noopPrefix starts the replacement of a call of type error: a function
// call is valid both as an expression and as a statement, and passing it
// the receiver and arguments keeps every variable used.
const noopPrefix = "func(...any) error { return nil }("

func main() {
	run := flag.String("run", "", "only run tests matching this regexp (go test -run)")
	only := flag.String("sites", "", "only check call sites whose file:line or call matches this regexp")
	verbose := flag.Bool("v", false, "print the output of failing builds")
	flag.Parse()

	var filter *regexp.Regexp
	if *only != "" {
		filter = regexp.MustCompile(*only)
	}
	sites, err := findSites(filter)
	if err != nil {
		fmt.Fprintln(os.Stderr, "teeth:", err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "teeth")
	if err != nil {
		fmt.Fprintln(os.Stderr, "teeth:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(tmp)

	// The unmodified tree must pass, or every site looks caught.
	for _, pkg := range []string{"./vfs", "./storage", "./tiered", "./controller/raftlog", "./controller"} {
		if failed, out := runTests(pkg, "", *run); len(failed) > 0 || out != "" {
			fmt.Fprintf(os.Stderr, "teeth: the unmodified tests of %s fail: %v\n%s", pkg, failed, out)
			os.Exit(2)
		}
	}

	fmt.Println("| call site | call | caught by |")
	fmt.Println("|---|---|---|")
	uncaught := 0
	for i, s := range sites {
		overlay, err := writeOverlay(tmp, i, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "teeth:", err)
			os.Exit(2)
		}
		var caught []string
		var buildErr string
		for _, pkg := range s.pkgs {
			failed, out := runTests(pkg, overlay, *run)
			if out != "" {
				buildErr = out
				break
			}
			if len(failed) > 0 {
				caught = append(caught, pkg+": "+strings.Join(failed, ", "))
				break
			}
		}
		verdict := strings.Join(caught, "; ")
		switch {
		case buildErr != "":
			verdict = "BUILD FAILED"
			if *verbose {
				fmt.Fprintln(os.Stderr, buildErr)
			}
			uncaught++
		case len(caught) == 0:
			verdict = "**NOT CAUGHT**"
			uncaught++
		}
		fmt.Printf("| %s:%d | `%s` | %s |\n", s.file, s.line, s.call, verdict)
	}
	if uncaught > 0 {
		fmt.Fprintf(os.Stderr, "teeth: %d of %d call sites are not caught by any test\n", uncaught, len(sites))
		os.Exit(1)
	}
}

// findSites lists the durability calls in the target files. Methods of the
// vfs package (the implementations of Sync and SyncDir) are not call sites
// of the seam; the helper functions in vfs/fs.go are.
func findSites(filter *regexp.Regexp) ([]site, error) {
	var out []site
	fset := token.NewFileSet()
	for _, t := range targets {
		files, err := filepath.Glob(t.glob)
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			f, err := parser.ParseFile(fset, name, src, 0)
			if err != nil {
				return nil, err
			}
			isVFS := strings.HasPrefix(name, "vfs/")
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || (isVFS && fn.Recv != nil) {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || !isDurabilityCall(call) {
						return true
					}
					start, end := fset.Position(call.Pos()), fset.Position(call.End())
					text := func(e ast.Node) string {
						return string(src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset])
					}
					operands := []string{text(call.Fun.(*ast.SelectorExpr).X)}
					for _, a := range call.Args {
						operands = append(operands, text(a))
					}
					s := site{
						file:  name,
						line:  start.Line,
						call:  string(src[start.Offset:end.Offset]),
						start: start.Offset,
						end:   end.Offset,
						pkgs:  t.pkgs,

						operands: strings.Join(operands, ", "),
					}
					if filter == nil || filter.MatchString(fmt.Sprintf("%s:%d", s.file, s.line)) || filter.MatchString(s.call) {
						out = append(out, s)
					}
					return true
				})
			}
		}
	}
	return out, nil
}

// isDurabilityCall matches x.Sync(), x.SyncDir(dir), x.SyncFS(dir), and in storage the
// wrappers x.sync() of a segment or index (so that each index's fsync is
// checked on its own).
func isDurabilityCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch sel.Sel.Name {
	case "Sync", "sync":
		return len(call.Args) == 0
	case "SyncDir", "SyncFS":
		return len(call.Args) == 1
	}
	return false
}

func writeOverlay(tmp string, i int, s site) (string, error) {
	src, err := os.ReadFile(s.file)
	if err != nil {
		return "", err
	}
	noop := noopPrefix + s.operands + ")"
	mutated := append(append(append([]byte(nil), src[:s.start]...), noop...), src[s.end:]...)
	abs, err := filepath.Abs(s.file)
	if err != nil {
		return "", err
	}
	repl := filepath.Join(tmp, fmt.Sprintf("site%d.go", i))
	if err := os.WriteFile(repl, mutated, 0o644); err != nil {
		return "", err
	}
	data, err := json.Marshal(map[string]map[string]string{"Replace": {abs: repl}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(tmp, fmt.Sprintf("overlay%d.json", i))
	return overlay, os.WriteFile(overlay, data, 0o644)
}

var failLine = regexp.MustCompile(`(?m)^--- FAIL: (Test[^ /]*)`)

// runTests runs one package's tests and returns the failed top-level tests,
// or the output when the build failed.
func runTests(pkg, overlay, run string) (failed []string, buildErr string) {
	// A disabled fsync can make a test wait for one forever.
	args := []string{"test", "-count=1", "-timeout=120s"}
	if overlay != "" {
		// One failing test is all a site needs: the rest of the
		// package's tests need not run (this took teeth from most of
		// make test's time to a fraction of it).
		args = append(args, "-overlay="+overlay, "-failfast")
	}
	if run != "" {
		args = append(args, "-run="+run)
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	seen := map[string]bool{}
	for _, m := range failLine.FindAllStringSubmatch(out.String(), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			failed = append(failed, m[1])
		}
	}
	if err != nil && len(failed) == 0 {
		if strings.Contains(out.String(), "test timed out") {
			return []string{"(timeout)"}, ""
		}
		if strings.Contains(out.String(), "panic:") {
			return []string{"(panic)"}, ""
		}
		return nil, out.String()
	}
	return failed, ""
}
