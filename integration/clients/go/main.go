// Command goclients runs the produce/consume/group/admin check with a Go
// client library other than franz-go, or sarama's transactions check. It
// lives in its own module so that the broker's go.mod does not carry these
// clients.
//
//	goclients sarama|kafka-go|sarama-transactions|kafka-go-transactions BOOTSTRAP TOPIC GROUP COUNT
//	goclients sarama-open-transaction BOOTSTRAP TOPIC TXNID COUNT
//
// BOOTSTRAP is one host:port or several, comma-separated (a cluster).
//
// It prints one JSON line with what it saw and exits non-zero on failure.
// (segmentio/kafka-go has no transactional producer: its record batches
// always carry producer id -1, so its transactions check commits and aborts
// transactions of offsets only, kafkagotxn.go.)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// seeds splits a comma-separated BOOTSTRAP into the addresses the client
// libraries take as a list.
func seeds(bootstrap string) []string { return strings.Split(bootstrap, ",") }

// report is what every client check prints; the harness checks it.
type report struct {
	Produced    int    `json:"produced"`
	Consumed    int    `json:"consumed"`
	Committed   int64  `json:"committed"`
	GroupListed bool   `json:"group_listed"`
	GroupState  string `json:"group_state,omitempty"`
	Version     string `json:"version,omitempty"`
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: goclients sarama|kafka-go|sarama-transactions|kafka-go-transactions|sarama-open-transaction BOOTSTRAP TOPIC GROUP|TXNID COUNT")
		os.Exit(2)
	}
	count, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fmt.Fprintln(os.Stderr, "COUNT:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rep any
	switch os.Args[1] {
	case "sarama":
		rep, err = checkSarama(ctx, os.Args[2], os.Args[3], os.Args[4], count)
	case "kafka-go":
		rep, err = checkKafkaGo(ctx, os.Args[2], os.Args[3], os.Args[4], count)
	case "sarama-transactions":
		rep, err = checkSaramaTxn(ctx, os.Args[2], os.Args[3], os.Args[4], count)
	case "kafka-go-transactions":
		rep, err = checkKafkaGoTxn(ctx, os.Args[2], os.Args[3], os.Args[4], count)
	case "sarama-open-transaction":
		rep, err = openSaramaTxn(os.Args[2], os.Args[3], os.Args[4], count)
	default:
		err = fmt.Errorf("unknown client %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
}

func values(count int) []string {
	v := make([]string, count)
	for i := range v {
		v[i] = fmt.Sprintf("v-%d", i)
	}
	return v
}

// sameValues checks that got holds exactly want, each once.
func sameValues(got, want []string) error {
	g := append([]string(nil), got...)
	w := append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	if len(g) != len(w) {
		return fmt.Errorf("consumed %d records, want %d", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			return fmt.Errorf("consumed records differ from produced ones at %q vs %q", g[i], w[i])
		}
	}
	return nil
}
