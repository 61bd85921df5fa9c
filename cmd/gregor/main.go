// Command gregor is a Kafka-compatible broker.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "gregor: the broker is not built yet")
	os.Exit(1)
}
