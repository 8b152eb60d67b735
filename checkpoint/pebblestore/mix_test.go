package pebblestore

import (
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

// TestMixStore runs checkpoint's mix-state suite against a Store.
func TestMixStore(t *testing.T) {
	storetest.Mix(t, func(t *testing.T) (checkpoint.Store, checkpoint.Backend, checkpoint.Layout) {
		s := openTemp(t)
		return s, s.backend, layout{}
	})
}
