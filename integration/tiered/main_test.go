package tiered

import (
	"os"
	"testing"

	"github.com/gregorbroker/gregor/integration/node"
)

// TestMain removes the gregor binary the tests built once they have run.
func TestMain(m *testing.M) { os.Exit(node.Main(m)) }
