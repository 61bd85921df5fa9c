package listeners

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/broker/config"
)

// build loads the embedded defaults with overrides (key=value), as gregor
// --override does, and builds their listeners.
func build(t *testing.T, overrides ...string) (*Set, error) {
	t.Helper()
	ovr := map[string]string{}
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		ovr[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	cfg, _, err := config.Load(config.EmbeddedDefaults(), ovr)
	if err != nil {
		return nil, err
	}
	return New(cfg, slog.New(slog.DiscardHandler))
}
