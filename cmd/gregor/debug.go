package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// startDebugListener serves Go's pprof endpoints when GREGOR_PPROF_ADDR is
// set (for example 127.0.0.1:6060). It is off by default.
func startDebugListener(log *slog.Logger) {
	addr := os.Getenv("GREGOR_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("pprof listener", "addr", addr, "err", err)
		return
	}
	log.Info("pprof listening", "addr", ln.Addr().String())
	go http.Serve(ln, mux)
}
