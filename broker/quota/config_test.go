package quota

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/config"
)

func TestOptionsFromConfig(t *testing.T) {
	cfg, _, err := config.Load(config.EmbeddedDefaults(), map[string]string{
		"quota.window.num": "5", "controller.quota.window.size.seconds": "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := OptionsFromConfig(cfg)
	want := Options{Client: Window{Samples: 5, Size: time.Second}, Controller: Window{Samples: 11, Size: 2 * time.Second}}
	if got != want {
		t.Fatalf("got %+v, want %+v (Kafka's defaults: 11 windows of 1 s)", got, want)
	}
}
