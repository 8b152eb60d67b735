package main

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// mixingClasses is the number of label values of the mixing figure.
const mixingClasses = 10

// mixMeter computes the mixing figure of a shuffled pass: the mean, over
// batches, of the total variation distance between the batch's label
// histogram and the global one, on label-sorted data of the same shape.
//
// The bench's files number their rows (the id column counts 0, 1, ... over
// the files streamed), and the order a stream emits depends on the files'
// shape (row counts, row groups, byte sizes), never on their values. So the
// label a label-sorted dataset of the same shape holds at row id,
// id*classes/rows, gives the figure without writing that dataset: each class
// is a contiguous tenth of the rows, the worst case for a shuffle. 0 is a
// perfect mix; a full random shuffle of 1024-row batches gives about 0.04,
// and a batch of one class 0.9.
type mixMeter struct {
	rows    int64 // of the dataset streamed
	sum     float64
	batches int64
	hist    [mixingClasses]int64
}

// add accounts for one batch given its id column.
func (m *mixMeter) add(col arrow.Array) {
	ids, ok := col.(*array.Int64)
	if !ok || ids.Len() == 0 || m.rows <= 0 {
		return
	}
	m.hist = [mixingClasses]int64{}
	// id*classes/rows, with a multiplication in place of a division per
	// row (the meter runs in the timed loop), corrected where rounding
	// put it one class off.
	scale := float64(mixingClasses) / float64(m.rows)
	for _, id := range ids.Int64Values() {
		c := int64(float64(id) * scale)
		if c*m.rows > id*mixingClasses {
			c--
		} else if (c+1)*m.rows <= id*mixingClasses {
			c++
		}
		m.hist[min(max(c, 0), mixingClasses-1)]++
	}
	m.sum += tvd(m.hist[:], int64(ids.Len()))
	m.batches++
}

// tvd is the total variation distance between a histogram of n values and
// the uniform one.
func tvd(hist []int64, n int64) float64 {
	var d float64
	for _, c := range hist {
		d += math.Abs(float64(c)/float64(n) - 1/float64(len(hist)))
	}
	return d / 2
}

// value is the figure, or -1 if no batch was seen.
func (m *mixMeter) value() float64 {
	if m == nil || m.batches == 0 {
		return -1
	}
	return m.sum / float64(m.batches)
}

// merge adds the batches of o (another rank of the same pass).
func (m *mixMeter) merge(o *mixMeter) *mixMeter {
	switch {
	case o == nil:
		return m
	case m == nil:
		c := *o
		return &c
	}
	c := *m
	c.sum += o.sum
	c.batches += o.batches
	return &c
}
