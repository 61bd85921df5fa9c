// Command nullbroker runs the benchmark's null broker (bench/nullbroker):
// a Kafka-protocol responder that stores nothing, to measure what the load
// generators alone reach.
//
//	nullbroker -payloads FILE [-addr 127.0.0.1:0] [-records-per-batch 128] [-partitions 1] [-debug]
//
// FILE is newline-separated record values, as `loadgen payloads` writes.
// It prints "nullbroker listening on HOST:PORT" once it accepts
// connections, and stops on SIGINT or SIGTERM.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gregorbroker/gregor/bench/nullbroker"
)

func main() { os.Exit(run()) }

func run() int {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0 picks one)")
	payloadFile := flag.String("payloads", "", "newline-separated record values for fetch batches (from `loadgen payloads`)")
	perBatch := flag.Int("records-per-batch", 128, "records in each pre-built fetch batch")
	partitions := flag.Int("partitions", 1, "partitions of auto-created topics")
	debug := flag.Bool("debug", false, "log every request")
	flag.Parse()
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *payloadFile == "" {
		log.Error("-payloads FILE is required")
		return 2
	}
	raw, err := os.ReadFile(*payloadFile)
	if err != nil {
		log.Error("reading payloads", "err", err)
		return 1
	}
	var payloads [][]byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(line) > 0 {
			payloads = append(payloads, line)
		}
	}
	srv, err := nullbroker.Listen(nullbroker.Config{Addr: *addr, Payloads: payloads,
		RecordsPerBatch: *perBatch, DefaultPartitions: *partitions, Log: log})
	if err != nil {
		log.Error("starting", "err", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		srv.Close()
	}()
	fmt.Println("nullbroker listening on", srv.Addr())
	if err := srv.Serve(); err != nil {
		log.Error("serving", "err", err)
		return 1
	}
	return 0
}
