package gcs_test

import (
	"testing"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// Rounds of as many concurrent range reads as sluice keeps in flight to a
// bucket reuse their connections: Go's default transport keeps 2 idle per
// host, so each round after the first opened 14 new ones (a TCP and, on real
// GCS, a TLS handshake each): 141 connections in all.
func TestConcurrentReadsReuseConnections(t *testing.T) { scratch.CheckConnsReused(t, scratch.GCS) }
