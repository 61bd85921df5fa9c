//go:build race

package metrics

// The race detector allocates: allocation counts are meaningful without it.
const raceEnabled = true
