//go:build !unix

package main

// runWarm does nothing where the harness cannot re-execute itself: the
// runtime's defaults stand (see warm_unix.go).
func runWarm() {}
