package formats

import "github.com/apache/arrow-go/v18/arrow"

// DataBytes is the memory held by d's buffers and its children's. A
// driver whose files store Arrow's own buffers (IPC) counts Unit.Bytes
// with it; a stream counts with it what decoded batches hold.
func DataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += DataBytes(c)
	}
	return n
}
