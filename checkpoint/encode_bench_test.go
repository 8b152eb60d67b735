package checkpoint_test

import (
	"testing"

	"github.com/sluicedata/sluice/checkpoint"
	"github.com/sluicedata/sluice/checkpoint/internal/storetest"
)

func BenchmarkEncode(b *testing.B) {
	st := storetest.RealisticState()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkpoint.Encode(st); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	enc, err := checkpoint.Encode(storetest.RealisticState())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkpoint.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
