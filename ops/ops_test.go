package ops

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
)

// With a user and password, every page but the probes asks for them.
func TestBasicAuth(t *testing.T) {
	srv, err := Start(Options{Addr: "127.0.0.1:0", Registry: metrics.NewRegistry(),
		Image: func() *metadata.Image { return nil }, Ready: func() (bool, string) { return true, "" },
		Username: "ops", Password: "s3cret", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path, user, password string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, user, password string
		want                 int
	}{
		{"/metrics", "", "", http.StatusUnauthorized},
		{"/metrics", "ops", "wrong", http.StatusUnauthorized},
		{"/metrics", "other", "s3cret", http.StatusUnauthorized},
		{"/metrics", "ops", "s3cret", http.StatusOK},
		{"/debug/pprof/", "", "", http.StatusUnauthorized},
		{"/healthz", "", "", http.StatusOK},
		{"/readyz", "", "", http.StatusOK},
	} {
		if got := get(tc.path, tc.user, tc.password); got != tc.want {
			t.Errorf("GET %s as %q/%q: %d, want %d", tc.path, tc.user, tc.password, got, tc.want)
		}
	}
}
