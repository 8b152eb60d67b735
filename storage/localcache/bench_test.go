package localcache

import (
	"context"
	"testing"
)

// BenchmarkRead reads a 64 MiB object in 1 MiB ranges straight from a
// local file bucket and from the cache's blocks of it, once they are all
// cached: what a cached epoch costs over a local one.
func BenchmarkRead(b *testing.B) {
	data := content(12, 64<<20)
	src := object(b, data)
	c := open(b, Options{Dir: b.TempDir(), MaxBytes: 1 << 30})
	via, _ := cached(c, src)
	buf := make([]byte, 1<<20)
	for _, s := range []struct {
		name string
		read func(off int64) error
	}{
		{"file", func(off int64) error { _, err := src.ReaderAt(context.Background()).ReadAt(buf, off); return err }},
		{"cached", func(off int64) error { _, err := via.ReaderAt(context.Background()).ReadAt(buf, off); return err }},
	} {
		for off := int64(0); off < int64(len(data)); off += int64(len(buf)) {
			if err := s.read(off); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				for off := int64(0); off < int64(len(data)); off += int64(len(buf)) {
					if err := s.read(off); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
