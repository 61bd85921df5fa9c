package integration

import (
	"strings"
	"testing"
)

func TestWordCountLinesCountsWhatItWrites(t *testing.T) {
	lines, want := WordCountLines(50, 3)
	again, _ := WordCountLines(50, 3)
	if strings.Join(lines, "\n") != strings.Join(again, "\n") {
		t.Fatal("the same seed gave other lines")
	}
	got := map[string]int{}
	for _, l := range lines {
		for _, w := range strings.Fields(l) {
			got[w]++
		}
	}
	if len(got) != len(want) {
		t.Fatalf("counted %d words, WordCountLines says %d", len(got), len(want))
	}
	for w, n := range got {
		if want[w] != n {
			t.Fatalf("%q: counted %d, WordCountLines says %d", w, n, want[w])
		}
	}
}

func TestCheckWordCounts(t *testing.T) {
	want := map[string]int{"a": 3, "b": 1}
	wc := func(pairs ...any) []WordCount {
		var out []WordCount
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, WordCount{Word: pairs[i].(string), Count: int64(pairs[i+1].(int))})
		}
		return out
	}
	if err := CheckWordCounts(wc("a", 1, "b", 1, "a", 2, "a", 3), want); err != nil {
		t.Fatalf("exact counts refused: %v", err)
	}
	for name, c := range map[string]struct {
		got  []WordCount
		says string
	}{
		"lost update":          {wc("a", 1, "a", 3, "b", 1), `"a": update 2 is 3`},
		"aborted update read":  {wc("a", 1, "a", 2, "a", 2, "a", 3, "b", 1), `"a": update 3 is 2`},
		"counted twice":        {wc("a", 1, "a", 2, "a", 3, "a", 4, "b", 1), `"a": 4 updates ending at 4, want 3`},
		"missing word":         {wc("a", 1, "a", 2, "a", 3), `"b": 0 updates`},
		"word never in input":  {wc("a", 1, "a", 2, "a", 3, "b", 1, "c", 1), `"c": 1 updates ending at 1, want 0`},
		"final count too low":  {wc("a", 1, "a", 2, "b", 1), `"a": 2 updates ending at 2, want 3`},
		"restarted from zero":  {wc("a", 1, "a", 2, "a", 1, "b", 1), `"a": update 3 is 1`},
		"nothing read at all":  {nil, "0 output records read"},
		"second word repeated": {wc("a", 1, "a", 2, "a", 3, "b", 1, "b", 1), `"b": update 2 is 1`},
	} {
		err := CheckWordCounts(c.got, want)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an error saying %s", name, err, c.says)
		}
	}
}
