package flatdecode

import (
	"errors"
	"fmt"

	"github.com/sluicedata/sluice/formats/parquet/internal/thrift"
)

// delta reads DELTA_BINARY_PACKED integers, a miniblock at a time.
type delta struct {
	data    []byte
	pos     int  // next byte after what has been taken
	maxBits uint // 32 or 64: the widest a miniblock may be

	perBlock, miniBlocks, perMini int
	left                          int // values not yet handed out
	last                          uint64
	firstDone                     bool

	minDelta uint64
	widths   []byte // of the current block's miniblocks
	mini     int    // the current miniblock
	miniLeft int    // its values not yet handed out
	bit      int    // bit offset in data of its next value
}

func (d *delta) uvarint() (uint64, error) {
	v, next, err := thrift.Uvarint(d.data, d.pos)
	d.pos = next
	if err != nil {
		return 0, errRunPastEnd
	}
	return v, nil
}

// init reads the header, which says how many values follow.
func (d *delta) init(data []byte, maxBits uint) error {
	*d = delta{data: data, maxBits: maxBits}
	perBlock, err := d.uvarint()
	if err != nil {
		return err
	}
	miniBlocks, err := d.uvarint()
	if err != nil {
		return err
	}
	total, err := d.uvarint()
	if err != nil {
		return err
	}
	first, err := d.uvarint()
	if err != nil {
		return err
	}
	if perBlock == 0 || perBlock%128 != 0 || perBlock > 1<<20 || miniBlocks == 0 || perBlock%miniBlocks != 0 || (perBlock/miniBlocks)%32 != 0 {
		return fmt.Errorf("delta header with blocks of %d values in %d miniblocks", perBlock, miniBlocks)
	}
	if total > 1<<31 {
		return fmt.Errorf("delta header of %d values", total)
	}
	d.perBlock, d.miniBlocks, d.perMini = int(perBlock), int(miniBlocks), int(perBlock/miniBlocks)
	d.left = int(total)
	d.last = uint64(int64(first>>1) ^ -int64(first&1))
	d.mini = d.miniBlocks // a block header comes first
	return nil
}

// block starts the next block.
func (d *delta) block() error {
	md, err := d.uvarint()
	if err != nil {
		return err
	}
	d.minDelta = uint64(int64(md>>1) ^ -int64(md&1))
	if d.pos+d.miniBlocks > len(d.data) {
		return errRunPastEnd
	}
	d.widths = d.data[d.pos : d.pos+d.miniBlocks]
	d.pos += d.miniBlocks
	for _, w := range d.widths {
		if uint(w) > d.maxBits {
			return fmt.Errorf("delta miniblock of %d-bit values", w)
		}
	}
	d.mini = -1
	return nil
}

var errDeltaShort = errors.New("delta values run out before the page's")

// next fills dst with the next len(dst) values.
func (d *delta) next(dst []uint64) error {
	if len(dst) > d.left {
		return errDeltaShort
	}
	i := 0
	if !d.firstDone && len(dst) > 0 {
		dst[0] = d.last
		d.firstDone = true
		d.left--
		i = 1
	}
	for i < len(dst) {
		if d.miniLeft == 0 {
			d.mini++
			if d.mini >= d.miniBlocks {
				if err := d.block(); err != nil {
					return err
				}
				continue
			}
			d.bit = d.pos * 8
			d.pos += d.perMini * int(d.widths[d.mini]) / 8
			d.miniLeft = d.perMini
		}
		w := uint(d.widths[d.mini])
		k := min(d.miniLeft, len(dst)-i)
		last, minDelta, bit := d.last, d.minDelta, d.bit
		for j := range k {
			v, ok := bits(d.data, bit, w)
			if !ok {
				return errRunPastEnd
			}
			bit += int(w)
			last += v + minDelta
			dst[i+j] = last
		}
		d.last, d.bit = last, bit
		d.miniLeft -= k
		d.left -= k
		i += k
	}
	return nil
}
