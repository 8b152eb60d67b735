package azure_test

import (
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// Rounds of as many concurrent range reads as sluice keeps in flight to a
// bucket reuse their connections: the Azure SDK's default transport keeps
// 10 idle per host, so each round after the first opened 6 new ones (a TCP
// and, on real Azure, a TLS handshake each): 69 connections in all.
func TestConcurrentReadsReuseConnections(t *testing.T) { scratch.CheckConnsReused(t, scratch.Azure) }
