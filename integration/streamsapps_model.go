package integration

// The input of each StreamsApps topology and what the topology must make
// of it, computed here from the semantics Kafka Streams documents, without
// running anything: a model per topology. Every record is written to the
// partition the Java producer would choose for its key (kafkaPartition):
// the models need to know which keys share a task, as stream time, and so
// which windows close, is kept per task, and Streams partitions its own
// topics so.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed5eed)) }

// updates is a model's expected output: each key's values in the order
// the app writes them (nil for a tombstone).
type updates map[string][]*string

func (u updates) add(key string, v *string) { u[key] = append(u[key], v) }

func (u updates) clone() updates {
	c := updates{}
	for k, vs := range u {
		c[k] = slices.Clone(vs)
	}
	return c
}

func (u updates) count() int {
	n := 0
	for _, vs := range u {
		n += len(vs)
	}
	return n
}

// joinWorkload is the stream-table join's input: customers (the table)
// and orders (the stream), co-partitioned by customer index. Phase 0 goes
// in before the app starts, customers with earlier event times than
// orders: Streams must read the table partition before the orders of the
// same task (its timestamp synchronisation, which waits for a partition
// whose data the broker has). In phase 1 some customers change and new
// ones come; the orders of phase 2 go in once the app has committed the
// table's end, so they must see the new values. Orders of customers the
// table does not have are dropped by the inner join.
type joinWorkload struct {
	phases [3][]inputRecord
	want   updates
}

func newJoinWorkload(customers, orders string, partitions int32, base time.Time) joinWorkload {
	rng := newRand(21)
	var w joinWorkload
	w.want = updates{}
	table := map[string]string{}
	cust := func(i int) (string, int32) {
		k := fmt.Sprintf("cust-%02d", i)
		return k, kafkaPartition(k, partitions)
	}
	at := base
	tick := func() time.Time { at = at.Add(time.Millisecond); return at }
	setCustomer := func(phase, i, version int) {
		k, p := cust(i)
		v := fmt.Sprintf("name-%02d-v%d", i, version)
		table[k] = v
		w.phases[phase] = append(w.phases[phase], inputRecord{Topic: customers, Partition: p, Key: k, Value: str(v), Time: tick()})
	}
	order := func(phase, n int) {
		i := rng.IntN(36) // 30..35 have no customer until phase 1 adds some
		k, p := cust(i)
		v := fmt.Sprintf("order-%04d:%d", n, 1+rng.IntN(500))
		w.phases[phase] = append(w.phases[phase], inputRecord{Topic: orders, Partition: p, Key: k, Value: str(v), Time: tick()})
		if c, ok := table[k]; ok {
			w.want.add(k, str(v+"|"+c))
		}
	}
	for i := range 30 {
		for version := range 1 + rng.IntN(3) {
			setCustomer(0, i, version+1)
		}
	}
	at = at.Add(time.Second)
	for n := range 300 {
		order(0, n)
	}
	for i := range 34 {
		if i >= 30 || rng.IntN(3) == 0 {
			setCustomer(1, i, 10+rng.IntN(5))
		}
	}
	for n := range 300 {
		order(2, 300+n)
	}
	return w
}

// windowWorkload is the windowed aggregation's input: sensors' readings
// with event times that mostly advance, some out of order within the grace
// period, some beyond it (late, dropped), and at the end one record per
// partition far ahead that closes every window the readings opened.
type windowWorkload struct {
	input  []inputRecord
	want   updates
	late   int // readings dropped as late
	window time.Duration
	grace  time.Duration
}

func newWindowWorkload(topic string, partitions int32, base time.Time) windowWorkload {
	const sensors = 12
	w := windowWorkload{window: 10 * time.Second, grace: 5 * time.Second}
	rng := newRand(33)
	size, grace := w.window.Milliseconds(), w.grace.Milliseconds()
	clock := make([]int64, partitions) // each partition's latest event time, in ms
	for p := range clock {
		clock[p] = base.UnixMilli()
	}
	for range 600 {
		i := rng.IntN(sensors)
		key := fmt.Sprintf("sensor-%02d", i)
		p := kafkaPartition(key, partitions)
		clock[p] += int64(rng.IntN(1500))
		ts := clock[p]
		switch r := rng.IntN(100); {
		case r < 12:
			ts -= int64(rng.IntN(8000)) // out of order: within grace or just past it
		case r < 15:
			ts -= 15000 + int64(rng.IntN(10000)) // past the grace of its window
		}
		w.input = append(w.input, inputRecord{Topic: topic, Partition: p, Key: key,
			Value: str(fmt.Sprint(1 + rng.IntN(100))), Time: time.UnixMilli(ts)})
	}
	for p := range partitions {
		// The first flush key that hashes to p.
		key := ""
		for n := 0; key == "" || kafkaPartition(key, partitions) != p; n++ {
			key = fmt.Sprintf("flush-%d", n)
		}
		w.input = append(w.input, inputRecord{Topic: topic, Partition: p, Key: key,
			Value: str("0"), Time: time.UnixMilli(clock[p] + size + grace + 1000)})
	}

	w.want, w.late = windowModel(w.input, size, grace)
	return w
}

// windowModel is what the windowed aggregation with suppression makes of
// input (sizes in ms): each closed window's count:sum keyed key@start, and
// how many records were dropped as late.
//
// Stream time is the largest event time a partition's task has seen. A
// reading belongs to the window [start, start+size) that holds it and is
// dropped once that window's end plus grace is no later than stream time;
// suppression emits a window, once, when stream time reaches its end plus
// grace.
func windowModel(input []inputRecord, size, grace int64) (updates, int) {
	type win struct {
		key   string
		start int64
	}
	type agg struct{ n, sum int64 }
	want, late := updates{}, 0
	streamTime := map[int32]int64{}
	aggs := map[win]*agg{}
	partOf := map[win]int32{}
	for _, r := range input {
		ts := r.Time.UnixMilli()
		if st, ok := streamTime[r.Partition]; !ok || ts > st {
			streamTime[r.Partition] = ts
		}
		start := ts - ts%size
		if start+size+grace <= streamTime[r.Partition] {
			late++
			continue
		}
		k := win{r.Key, start}
		a := aggs[k]
		if a == nil {
			a = &agg{}
			aggs[k] = a
			partOf[k] = r.Partition
		}
		v, err := strconv.ParseInt(*r.Value, 10, 64)
		if err != nil {
			panic(err) // the model wrote it
		}
		a.n++
		a.sum += v
	}
	for k, a := range aggs {
		if k.start+size+grace <= streamTime[partOf[k]] {
			want.add(fmt.Sprintf("%s@%d", k.key, k.start), str(fmt.Sprintf("%d:%d", a.n, a.sum)))
		}
	}
	return want, late
}

// fkWorkload is the foreign-key join's input, in phases the scenario runs
// one after the other, each once the app has written all the previous
// phase's output (so that each update meets the other table as the
// previous phases left it):
//
//	0 products
//	1 orders, each of an existing product: one result each
//	2 products change (one result per order of the product), one is
//	  deleted (a tombstone per order of it)
//	3 orders change: quantity only, or to another product (the old one's
//	  changes no longer reach them), or are deleted (a tombstone)
//	4 products change again
type fkWorkload struct {
	phases [5][]inputRecord
	want   updates
	// wantAfter[i] is the output of the phases up to i.
	wantAfter [5]updates
}

func newFKWorkload(orders, products string, orderParts, productParts int32, base time.Time) fkWorkload {
	const nProducts, nOrders = 15, 80
	rng := newRand(47)
	w := fkWorkload{want: updates{}}
	at := base
	tick := func() time.Time { at = at.Add(time.Millisecond); return at }
	product := map[string]string{}
	order := map[string]string{} // order -> productId:qty
	prodKey := func(i int) (string, int32) {
		k := fmt.Sprintf("prod-%02d", i)
		return k, kafkaPartition(k, productParts)
	}
	orderKey := func(i int) (string, int32) {
		k := fmt.Sprintf("order-%03d", i)
		return k, kafkaPartition(k, orderParts)
	}
	productOf := func(o string) string { p, _, _ := strings.Cut(o, ":"); return p }
	// result is what the join emits for an order now.
	emit := func(o string) {
		if v, ok := order[o]; ok {
			if pv, ok := product[productOf(v)]; ok {
				w.want.add(o, str(v+"|"+pv))
				return
			}
		}
		w.want.add(o, nil)
	}
	subscribers := func(p string) []string {
		var subs []string
		for i := range nOrders {
			k, _ := orderKey(i)
			if v, ok := order[k]; ok && productOf(v) == p {
				subs = append(subs, k)
			}
		}
		return subs
	}
	setProduct := func(phase, i int, v *string) {
		k, part := prodKey(i)
		w.phases[phase] = append(w.phases[phase], inputRecord{Topic: products, Partition: part, Key: k, Value: v, Time: tick()})
		if v == nil {
			delete(product, k)
		} else {
			product[k] = *v
		}
		if phase > 0 {
			for _, o := range subscribers(k) {
				emit(o)
			}
		}
	}
	setOrder := func(phase, i int, v *string) {
		k, part := orderKey(i)
		w.phases[phase] = append(w.phases[phase], inputRecord{Topic: orders, Partition: part, Key: k, Value: v, Time: tick()})
		if v == nil {
			delete(order, k)
		} else {
			order[k] = *v
		}
		emit(k)
	}
	for i := range nProducts {
		setProduct(0, i, str(fmt.Sprintf("product-%02d:%d", i, 10+rng.IntN(90))))
	}
	for i := range nOrders {
		p, _ := prodKey(rng.IntN(nProducts))
		setOrder(1, i, str(fmt.Sprintf("%s:%d", p, 1+rng.IntN(9))))
	}
	w.wantAfter[1] = w.want.clone()
	deleted := rng.IntN(nProducts)
	for range 10 {
		i := rng.IntN(nProducts)
		if i == deleted {
			continue
		}
		setProduct(2, i, str(fmt.Sprintf("product-%02d:%d", i, 100+rng.IntN(900))))
	}
	setProduct(2, deleted, nil)
	w.wantAfter[2] = w.want.clone()
	deletedKey, _ := prodKey(deleted)
	for i := range nOrders {
		k, _ := orderKey(i)
		v := order[k]
		switch {
		case productOf(v) == deletedKey || rng.IntN(6) == 0:
			// Moves to another live product.
			j := rng.IntN(nProducts)
			for j == deleted {
				j = rng.IntN(nProducts)
			}
			p, _ := prodKey(j)
			setOrder(3, i, str(fmt.Sprintf("%s:%d", p, 1+rng.IntN(9))))
		case rng.IntN(5) == 0:
			setOrder(3, i, str(fmt.Sprintf("%s:%d", productOf(v), 10+rng.IntN(9))))
		case rng.IntN(12) == 0:
			setOrder(3, i, nil)
		}
	}
	w.wantAfter[3] = w.want.clone()
	for range 8 {
		i := rng.IntN(nProducts)
		if i == deleted {
			continue
		}
		setProduct(4, i, str(fmt.Sprintf("product-%02d:%d", i, 1000+rng.IntN(9000))))
	}
	w.wantAfter[4] = w.want.clone()
	return w
}

// sumsWorkload is the interactive-query app's input: deltas to accounts,
// and each account's running sum after each delta.
type sumsWorkload struct {
	input []inputRecord
	want  updates
	final map[string]string
}

func newSumsWorkload(topic string, partitions int32, n int, seed uint64, base time.Time, prior *sumsWorkload) sumsWorkload {
	const accounts = 40
	rng := newRand(seed)
	w := sumsWorkload{want: updates{}, final: map[string]string{}}
	sums := map[string]int64{}
	if prior != nil {
		for k, vs := range prior.want {
			w.want[k] = append([]*string(nil), vs...)
		}
		for k, v := range prior.final {
			w.final[k] = v
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				panic(err) // the model wrote it
			}
			sums[k] = s
		}
	}
	for j := range n {
		i := rng.IntN(accounts)
		k := fmt.Sprintf("acct-%02d", i)
		d := int64(rng.IntN(200) - 50)
		sums[k] += d
		s := fmt.Sprint(sums[k])
		w.input = append(w.input, inputRecord{Topic: topic, Partition: kafkaPartition(k, partitions), Key: k, Value: str(fmt.Sprint(d)),
			Time: base.Add(time.Duration(j) * time.Millisecond)})
		w.want.add(k, str(s))
		w.final[k] = s
	}
	return w
}

// kafkaPartition is the partition the Java producer's default partitioner
// picks for a key among n: MurmurHash2 (seed 0x9747b28c) of the key's
// bytes, sign bit cleared, modulo n. It must be that one wherever Streams
// itself writes by the same key: the subscription-registration topic of a
// foreign-key join is partitioned by the foreign key, so each product must
// be in the partition of the task its subscriptions go to.
func kafkaPartition(key string, n int32) int32 {
	const m, seed = 0x5bd1e995, 0x9747b28c
	b := []byte(key)
	h := uint32(seed) ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> 24
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h&0x7fffffff) % n
}
