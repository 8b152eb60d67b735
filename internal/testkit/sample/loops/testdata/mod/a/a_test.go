package a

import (
	"testing"

	"example.com/mod/kit"
)

func helper() int { return kit.Few(10) }

func TestDirect(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
}

func TestThroughHelper(t *testing.T) { _ = helper() }

func TestThroughMethod(t *testing.T) {
	var s kit.Set
	_ = s.Draw()
}

func TestThroughClosure(t *testing.T) {
	t.Run("x", func(t *testing.T) { _ = kit.Few(2) })
}

func TestPlain(t *testing.T) { _ = kit.Plain() }

func FuzzSampled(f *testing.F) { _ = helper() }

func TestMain(m *testing.M) { _ = testing.Short() }
