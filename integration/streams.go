package integration

// Kafka Streams' WordCountDemo (kafka-streams-examples 4.3.1) as a target's
// client: the input it is given, how it is started with
// processing.guarantee=exactly_once_v2, and the check of what it wrote. The
// streams/ scenario and the kill -9 test in integration/streams share it.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// WordCountDemo's topics are fixed in its source; it takes only a
// properties file.
const (
	mainWordCountDemo    = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
	WordCountInputTopic  = "streams-plaintext-input"
	WordCountOutputTopic = "streams-wordcount-output"
)

// WordCountApp is one run of WordCountDemo.
type WordCountApp struct {
	Bootstrap string
	AppID     string // application.id: the group, transactional ids and internal topics' prefix
	// Dir holds the properties file, the log (wordcount.log), state.dir
	// and java.io.tmpdir, where RocksDB unpacks its native library.
	Dir string
	// Extra are more key=value lines for the properties file; a key given
	// here wins over the defaults below.
	Extra []string
}

// LogPath is where the app's output goes.
func (a WordCountApp) LogPath() string { return filepath.Join(a.Dir, "wordcount.log") }

// properties is the demo's config: exactly_once_v2 with a short commit
// interval (so that a transaction is open most of the time the app has
// input) and a short repartition purge interval (so that the purge with
// DeleteRecords is seen within a test).
func (a WordCountApp) properties() string {
	lines := map[string]string{
		"application.id":                a.AppID,
		"bootstrap.servers":             a.Bootstrap,
		"processing.guarantee":          "exactly_once_v2",
		"commit.interval.ms":            "1000",
		"repartition.purge.interval.ms": "1000",
		"num.stream.threads":            "2",
		"state.dir":                     filepath.Join(a.Dir, "state"),
	}
	for _, kv := range a.Extra {
		k, v, _ := strings.Cut(kv, "=")
		lines[k] = v
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(lines)) {
		fmt.Fprintf(&b, "%s=%s\n", k, lines[k])
	}
	return b.String()
}

// StartWordCount starts WordCountDemo in the background. The caller stops
// it with Proc.Stop: SIGTERM runs the demo's shutdown hook, which closes
// the KafkaStreams instance (committing or aborting its transactions).
func (t *Tools) StartWordCount(ctx context.Context, app WordCountApp) (*Proc, error) {
	if err := os.MkdirAll(app.Dir, 0o755); err != nil {
		return nil, err
	}
	props := filepath.Join(app.Dir, "wordcount.properties")
	if err := os.WriteFile(props, []byte(app.properties()), 0o644); err != nil {
		return nil, err
	}
	// The broker's log config: INFO to stdout, so that the log shows
	// Streams' state transitions, rebalances and the clients' errors.
	logCfg, err := t.Log4jConfig(true)
	if err != nil {
		return nil, err
	}
	c, err := t.javaCmdLogging(ctx, SetStreams, "", logCfg, mainWordCountDemo, props)
	if err != nil {
		return nil, err
	}
	c.Args = append([]string{"-Djava.io.tmpdir=" + app.Dir}, c.Args...)
	c.Dir = app.Dir
	return Start(c, app.LogPath())
}

// wordCountVocabulary is the words the input is made of: lower case
// letters only, as the demo lower-cases and splits on non-word characters.
var wordCountVocabulary = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliett
	kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu
	kafka gregor streams broker`)

// WordCountLines returns n lines of eight words each, drawn with a
// generator seeded by seed, and how often each word occurs in them.
func WordCountLines(n int, seed uint64) ([]string, map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	lines := make([]string, n)
	counts := map[string]int{}
	for i := range lines {
		words := make([]string, 8)
		for j := range words {
			w := wordCountVocabulary[rng.IntN(len(wordCountVocabulary))]
			words[j] = w
			counts[w]++
		}
		lines[i] = strings.Join(words, " ")
	}
	return lines, counts
}

// WordCount is one record of the output topic: a word and its count then.
type WordCount struct {
	Word  string
	Count int64
}

// CheckWordCounts checks the committed output of a WordCount run read from
// the start of every partition, in the order read. Every word lives in one
// partition, and with the record cache off (the demo's default) every
// input word yields one update, so each word's counts must read exactly 1,
// 2, ..., want[word]: a gap is a lost update, a repeated or too-high count
// is a double count (an aborted transaction that a read_committed consumer
// saw, or input processed twice).
func CheckWordCounts(got []WordCount, want map[string]int) error {
	seen := map[string][]int64{}
	for _, r := range got {
		seen[r.Word] = append(seen[r.Word], r.Count)
	}
	var problems []string
	words := make([]string, 0, len(want)+len(seen))
	for w := range want {
		words = append(words, w)
	}
	for w := range seen {
		if _, ok := want[w]; !ok {
			words = append(words, w)
		}
	}
	sort.Strings(words)
	for _, w := range words {
		counts, n := seen[w], want[w]
		if bad := firstBadCount(counts, n); bad != "" {
			problems = append(problems, fmt.Sprintf("%q: %s", w, bad))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > 6 {
		problems = append(problems[:6], fmt.Sprintf("and %d more words", len(problems)-6))
	}
	return fmt.Errorf("word counts wrong (%d output records read): %s", len(got), strings.Join(problems, "; "))
}

// firstBadCount says where counts departs from 1..n, or "" if it does not.
func firstBadCount(counts []int64, n int) string {
	for i, c := range counts {
		if c != int64(i+1) {
			lo := max(0, i-3)
			return fmt.Sprintf("update %d is %d, want %d (…%v…, %d updates, final count should be %d)", i+1, c, i+1, counts[lo:min(len(counts), i+3)], len(counts), n)
		}
	}
	if len(counts) != n {
		last := int64(0)
		if len(counts) > 0 {
			last = counts[len(counts)-1]
		}
		return fmt.Sprintf("%d updates ending at %d, want %d", len(counts), last, n)
	}
	return ""
}
