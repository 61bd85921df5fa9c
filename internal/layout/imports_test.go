package layout

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gregorbroker/gregor/"

// pending are imports the table does not allow that a change in progress
// is still taking out: each is allowed until it is gone, and listing one
// that is gone fails, so the list only shrinks. None is left.
var pending = map[string]bool{}

// rule is one row of the README's table: packages matching any of from
// may import packages matching any of to.
type rule struct {
	from, to []string
	anything bool
}

// matches reports whether pkg is named by pattern ("a/b", or "a/..." for
// a and everything under it).
func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// specificity is how closely pattern names pkg: -1 when it does not,
// more for a longer base, and an exact name over "a/..." of the same base.
func specificity(pattern, pkg string) int {
	if !matches(pattern, pkg) {
		return -1
	}
	base, wild := strings.CutSuffix(pattern, "/...")
	if wild {
		return 2 * len(base)
	}
	return 2*len(base) + 1
}

// ruleFor is the row that governs pkg: of the rows naming it, the one that
// names it most specifically ("controller/decide" over "controller/..."),
// nil if none does.
func ruleFor(rules []rule, pkg string) *rule {
	var best *rule
	bestScore := -1
	for i := range rules {
		for _, p := range rules[i].from {
			if sc := specificity(p, pkg); sc > bestScore {
				best, bestScore = &rules[i], sc
			}
		}
	}
	return best
}

func matchesAny(patterns []string, pkg string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, pkg) })
}

// moduleRoot is the directory holding go.mod, above this test's.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// readRules reads the "may import" table of the README's Layout section.
func readRules(t *testing.T, root string) []rule {
	f, err := os.Open(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| package | may import |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 2 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		var r rule
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			r.from = append(r.from, m[1])
		}
		switch strings.TrimSpace(cells[1]) {
		case "anything":
			r.anything = true
		case "nothing":
		default:
			for _, m := range backquoted.FindAllStringSubmatch(cells[1], -1) {
				r.to = append(r.to, m[1])
			}
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("README.md has no \"| package | may import |\" table")
	}
	return rules
}

// imports lists every package of the module with the module's packages
// it imports (not its tests').
func imports(t *testing.T, root string) map[string][]string {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		graph[pkg] = nil
		for _, imp := range fields[1:] {
			if own, ok := strings.CutPrefix(imp, module); ok {
				graph[pkg] = append(graph[pkg], own)
			}
		}
	}
	return graph
}

func TestImportRule(t *testing.T) {
	root := moduleRoot(t)
	rules := readRules(t, root)
	graph := imports(t, root)
	seen := map[string]bool{}
	for pkg, imps := range graph {
		r := ruleFor(rules, pkg)
		for _, imp := range imps {
			if r != nil && (r.anything || matchesAny(r.to, imp)) {
				continue
			}
			edge := pkg + " -> " + imp
			if pending[edge] {
				seen[edge] = true
				continue
			}
			if r == nil {
				t.Errorf("%s is in no row of the README's import table, so it may import nothing of Gregor's; it imports %s", pkg, imp)
				continue
			}
			t.Errorf("%s imports %s, which the README's import table does not allow", pkg, imp)
		}
	}
	for edge := range pending {
		if !seen[edge] {
			t.Errorf("%q is gone: take it off the pending list", edge)
		}
	}
}

// The table itself keeps the data path off the quorum: nothing that
// broker, replica or a coordinator may import, directly or through
// another, is a controller package.
func TestImportTableKeepsTheControllerOffTheDataPath(t *testing.T) {
	rules := readRules(t, moduleRoot(t))
	graph := imports(t, moduleRoot(t))
	allowed := func(pkg, imp string) bool {
		r := ruleFor(rules, pkg)
		return r != nil && (r.anything || matchesAny(r.to, imp))
	}
	for _, start := range []string{"broker", "replica", "coordinator/group", "coordinator/txn", "coordinator/runtime"} {
		reach := map[string]bool{start: true}
		queue := []string{start}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			for other := range graph {
				if !reach[other] && allowed(pkg, other) {
					reach[other] = true
					queue = append(queue, other)
				}
			}
		}
		for pkg := range reach {
			if matches("controller/...", pkg) {
				t.Errorf("the table lets %s reach %s", start, pkg)
			}
		}
	}
}

// TestLayoutTableNamesEveryPackage: the README's Layout table ("| folder |
// what it holds |") has a row naming each package of the module, and
// names no folder that holds none, so it matches the tree folder by folder.
func TestLayoutTableNamesEveryPackage(t *testing.T) {
	root := moduleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "| folder | what it holds |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for _, m := range backquoted.FindAllStringSubmatch(cells[0], -1) {
			named[m[1]] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("README.md has no \"| folder | what it holds |\" table")
	}
	for pkg := range imports(t, root) {
		if !named[pkg] {
			t.Errorf("the README's Layout table has no row for %s", pkg)
		}
	}
	for folder := range named {
		if info, err := os.Stat(filepath.Join(root, folder)); err != nil || !info.IsDir() {
			t.Errorf("the README's Layout table names %s, which is no folder of the tree", folder)
		}
	}
}
