package azure_test

import (
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// Rounds of as many concurrent range reads as sluice keeps in flight to a
// bucket reuse their connections: the Azure SDK's default transport keeps
// 10 idle per host, so each round after the first opened 6 new ones (a TCP
// and, on real Azure, a TLS handshake each): 69 connections in all.
func TestConcurrentReadsReuseConnections(t *testing.T) {
	const inFlight, rounds = 16, 10
	n := scratch.ReadConns(t, scratch.Azure, inFlight, rounds, 64<<10)
	t.Logf("%d rounds of %d concurrent reads opened %d connections", rounds, inFlight, n)
	// A few more than the reads in flight is slack for timing; the default
	// pool needed some 16 + 9 × 6.
	if n > inFlight+4 {
		t.Errorf("%d rounds of %d concurrent reads opened %d connections, want at most %d", rounds, inFlight, n, inFlight+4)
	}
}
