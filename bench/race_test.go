//go:build race

package main

// raceEnabled is whether the test binary was built with -race.
const raceEnabled = true
