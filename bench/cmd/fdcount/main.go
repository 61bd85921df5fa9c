// Command fdcount measures how many file descriptors a broker holds for
// idle partitions: it creates topics totalling -partitions partitions,
// produces one record to each, then samples the number of entries in
// /proc/<pid>/fd of the broker process every -every for -wait.
//
//	./bin/gregor & fdcount -pid $! -partitions 5000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "broker address")
	pid := flag.Int("pid", 0, "broker process id (its /proc/<pid>/fd is counted)")
	partitions := flag.Int("partitions", 5000, "partitions to create")
	perTopic := flag.Int("per-topic", 100, "partitions per topic")
	prefix := flag.String("prefix", "fdcount", "topic name prefix")
	wait := flag.Duration("wait", 90*time.Second, "how long to sample after producing")
	every := flag.Duration("every", 10*time.Second, "sampling interval")
	check := flag.Int("check", 100, "after the wait, read back the record of this many partitions")
	flag.Parse()
	if *pid == 0 {
		log.Fatal("-pid is required")
	}
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fmt.Printf("before: %d descriptors\n", countFDs(*pid))

	var topics []string
	for made := 0; made < *partitions; made += *perTopic {
		n := min(*perTopic, *partitions-made)
		name := fmt.Sprintf("%s-%d", *prefix, len(topics))
		resp, err := adm.CreateTopic(ctx, int32(n), 1, nil, name)
		if err != nil || resp.Err != nil {
			log.Fatalf("creating %s: %v %v", name, err, resp.Err)
		}
		topics = append(topics, name)
	}
	// Let the broker open every partition before producing.
	time.Sleep(2 * time.Second)
	fmt.Printf("created %d partitions: %d descriptors\n", *partitions, countFDs(*pid))

	var recs []*kgo.Record
	for i, name := range topics {
		n := min(*perTopic, *partitions-i**perTopic)
		for p := 0; p < n; p++ {
			recs = append(recs, &kgo.Record{Topic: name, Partition: int32(p), Value: []byte("one record")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		log.Fatalf("producing: %v", err)
	}
	fmt.Printf("produced one record to each partition: %d descriptors\n", countFDs(*pid))
	for start := time.Now(); time.Since(start) < *wait; {
		time.Sleep(*every)
		fmt.Printf("idle %3.0fs: %d descriptors\n", time.Since(start).Seconds(), countFDs(*pid))
	}
	fmt.Printf("by kind after the wait: %s\n", fdKinds(*pid))
	if *check > 0 {
		readBack(ctx, *bootstrap, topics, *perTopic, *partitions, *check)
		fmt.Printf("read back %d partitions: %d descriptors\n", *check, countFDs(*pid))
	}
}

// readBack consumes the record of n partitions spread over all of them
// (idle partitions must still serve reads).
func readBack(ctx context.Context, bootstrap string, topics []string, perTopic, partitions, n int) {
	want := map[string]map[int32]kgo.Offset{}
	for i := 0; i < n; i++ {
		p := i * partitions / n
		topic := topics[p/perTopic]
		if want[topic] == nil {
			want[topic] = map[int32]kgo.Offset{}
		}
		want[topic][int32(p%perTopic)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumePartitions(want))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			log.Fatalf("read back %d of %d records: %v", got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != "one record" {
				log.Fatalf("%s-%d: read %q", r.Topic, r.Partition, r.Value)
			}
			got++
		})
	}
}

func countFDs(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		log.Fatal(err)
	}
	return len(ents)
}

// fdKinds groups the descriptors by what they point at (the file suffix,
// socket, pipe...).
func fdKinds(pid int) string {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	kinds := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		kind := target
		switch {
		case strings.HasPrefix(target, "socket:"):
			kind = "socket"
		case strings.HasPrefix(target, "pipe:"):
			kind = "pipe"
		case strings.HasPrefix(target, "anon_inode:"):
			kind = target
		default:
			kind = filepath.Ext(target)
		}
		kinds[kind]++
	}
	return fmt.Sprint(kinds)
}
