package pebblestore

import (
	"bufio"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// lockHelperEnv, when set to a directory, turns the test binary into a
// helper process that holds a store open there until its stdin closes, so a
// test can meet a directory locked by another process.
const lockHelperEnv = "SLUICE_PEBBLESTORE_LOCK_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHelperEnv); dir != "" {
		os.Exit(lockHelper(dir))
	}
	goleak.VerifyTestMain(m)
}

func lockHelper(dir string) int {
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("locked")
	// Hold the lock until the parent closes our stdin (or dies).
	bufio.NewReader(os.Stdin).ReadString('\n')
	if err := s.Close(); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}
