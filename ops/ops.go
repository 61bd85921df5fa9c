// Package ops is a node's HTTP listener for operators
// (gregor.http.listener): /metrics for Prometheus (package metrics),
// /healthz (the process serves), /readyz (the node is ready for traffic:
// what a Kubernetes readiness probe asks), /debug/metadata (the applied
// metadata image's offset, epoch and digest, so that tests and operators
// can check that every node holds the same metadata) and Go's pprof pages
// under /debug/pprof/.
//
// It imports metrics and metadata of Gregor's packages.
package ops

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
)

// Options configure the listener.
type Options struct {
	// Addr is host:port to listen on.
	Addr string
	// TLS, when set, serves HTTPS (gregor.http.ssl.*).
	TLS *tls.Config
	// Username and Password, when set, are asked for with HTTP Basic
	// authentication on every page but /healthz and /readyz, which say
	// nothing but whether the node is up and ready.
	Username, Password string
	Registry           *metrics.Registry
	// Image is the node's applied metadata image, nil until it follows
	// the metadata.
	Image func() *metadata.Image
	// Ready says whether the node is ready for traffic, and if not why.
	Ready  func() (bool, string)
	Logger *slog.Logger
}

// Server is the running listener.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Start listens on opts.Addr and serves until Close.
func Start(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("gregor.http.listener %s: %w", opts.Addr, err)
	}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		openMetrics := strings.Contains(r.Header.Get("Accept"), "application/openmetrics-text")
		if openMetrics {
			w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		}
		if err := opts.Registry.Write(w, openMetrics); err != nil {
			opts.Logger.Debug("writing metrics", "err", err)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := opts.Ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/debug/metadata", func(w http.ResponseWriter, _ *http.Request) {
		img := opts.Image()
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
	var handler http.Handler = mux
	if opts.Username != "" {
		handler = basicAuth(mux, opts.Username, opts.Password)
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("the HTTP listener stopped", "err", err)
		}
	}()
	opts.Logger.Info("HTTP listener serving /metrics, /healthz, /readyz", "addr", ln.Addr().String(), "tls", opts.TLS != nil)
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, waiting a moment for scrapes in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// basicAuth asks for user and password on every page but the health and
// readiness probes, comparing in constant time.
func basicAuth(next http.Handler, user, password string) http.Handler {
	wantUser, wantPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			u, p, ok := r.BasicAuth()
			gotUser, gotPassword := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
			if !ok || subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="gregor"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
