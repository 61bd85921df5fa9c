package main

import (
	"log/slog"
	"os"

	"github.com/gregorbroker/gregor/broker/config"
)

// httpListenerAddr is where the node's HTTP listener (package ops) listens:
// gregor.http.listener, or GREGOR_PPROF_ADDR, the address of the debug
// listener the HTTP listener replaced, which is still read when the key is
// not set. Empty: no listener.
func httpListenerAddr(s *settings, log *slog.Logger) string {
	if addr := s.cfg.HTTPListener(); addr != "" {
		return addr
	}
	if addr := os.Getenv("GREGOR_PPROF_ADDR"); addr != "" {
		log.Info("GREGOR_PPROF_ADDR serves the HTTP listener; " + config.HTTPListenerKey + " is its key")
		return addr
	}
	return ""
}
