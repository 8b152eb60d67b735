//go:build race

package main

// raceEnabled builds the binary under test with the race detector too, so
// that it shares the test's compiled packages and is checked for races.
const raceEnabled = true
