package main

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The meter's classes are id*classes/rows exactly, and its figure is 0 for
// batches that hold every class equally and 0.9 for batches of one class.
func TestMixMeter(t *testing.T) {
	for _, rows := range []int64{10, 999, 1000, 2_097_152, 4_194_304, 1<<40 + 7} {
		m := &mixMeter{rows: rows}
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for _, id := range []int64{0, 1, rows / 3, rows/10 - 1, rows / 10, rows - 1, rows/2 + 1} {
			b.Append(id)
			a := b.NewInt64Array()
			m.add(a)
			a.Release()
			want := id * mixingClasses / rows
			if m.hist[want] != 1 {
				t.Fatalf("rows %d id %d: histogram %v, want class %d", rows, id, m.hist, want)
			}
		}
		b.Release()
	}
	m := &mixMeter{rows: 1000}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for id := int64(0); id < 1000; id += 10 {
		b.Append(id)
	}
	even := b.NewInt64Array()
	defer even.Release()
	m.add(even)
	b.AppendValues([]int64{1, 2, 3, 4, 5}, nil)
	one := b.NewInt64Array()
	defer one.Release()
	m.add(one)
	if got := m.value(); got < 0.449 || got > 0.451 {
		t.Fatalf("mixing of an even and a one-class batch is %.4f, want 0.45", got)
	}
}
