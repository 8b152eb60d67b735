//go:build !race

package orc_test

const raceEnabled = false
