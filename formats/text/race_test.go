//go:build race

package text

// raceEnabled: the race detector makes the 100 MB line test take minutes
// while it checks no concurrency, so it runs without -race only.
const raceEnabled = true
