package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"

	"github.com/gregorbroker/gregor/metadata"
)

// startDebugListener serves Go's pprof endpoints when GREGOR_PPROF_ADDR is
// set (for example 127.0.0.1:6060), and /debug/metadata: the offset, epoch
// and digest of the metadata image this node has applied (so that tests
// and operators can check that every node holds the same metadata). It is
// off by default. image is read per request; nil until the node follows
// the metadata.
func startDebugListener(log *slog.Logger, image func() *metadata.Image) {
	addr := os.Getenv("GREGOR_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/metadata", func(w http.ResponseWriter, _ *http.Request) {
		img := image()
		if img == nil {
			http.Error(w, "no metadata yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"offset": img.Offset, "epoch": img.Epoch, "digest": metadata.ImageDigest(img)})
	})
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
