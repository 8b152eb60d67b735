//go:build race

package orc_test

// raceEnabled trims the largest reads of the tests under the race
// detector, which makes decoding ten times slower.
const raceEnabled = true
