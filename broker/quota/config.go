package quota

import (
	"time"

	"github.com/gregorbroker/gregor/broker/config"
)

// OptionsFromConfig reads the quota windows: quota.window.num and
// quota.window.size.seconds for produce, fetch and request quotas,
// controller.quota.window.num and controller.quota.window.size.seconds for
// controller mutations.
func OptionsFromConfig(cfg *config.Broker) Options {
	window := func(prefix string) Window {
		return Window{
			Samples: int(cfg.Int(prefix + "quota.window.num")),
			Size:    time.Duration(cfg.Int(prefix+"quota.window.size.seconds")) * time.Second,
		}
	}
	return Options{Client: window(""), Controller: window("controller.")}
}
