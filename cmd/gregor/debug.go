package main

import (
	"log/slog"
	"os"

	"github.com/gregorbroker/gregor/broker/config"
)

// devHTTPListener is where the HTTP listener serves in the zero-config dev
// mode, as Redpanda's admin API does on 9644.
const devHTTPListener = "127.0.0.1:9644"

// httpListenerAddr is where the node's HTTP listener (package ops) listens,
// and whether failing to listen there is only worth a warning:
// gregor.http.listener; else GREGOR_PPROF_ADDR, the address of the debug
// listener the HTTP listener replaced; else, in the zero-config dev mode
// (no file, no override), 127.0.0.1:9644 when it is free. Empty: no
// listener.
func httpListenerAddr(s *settings, log *slog.Logger) (addr string, optional bool) {
	if addr := s.cfg.HTTPListener(); addr != "" {
		return addr, false
	}
	if addr := os.Getenv("GREGOR_PPROF_ADDR"); addr != "" {
		log.Info("GREGOR_PPROF_ADDR serves the HTTP listener; " + config.HTTPListenerKey + " is its key")
		return addr, false
	}
	if s.zeroConfig {
		return devHTTPListener, true
	}
	return "", false
}
