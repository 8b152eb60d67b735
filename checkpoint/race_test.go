//go:build race

package checkpoint

// raceEnabled: the race detector's costs grow with the memory a test
// touches, so the scale tests compare times without it only.
const raceEnabled = true
