package orc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/internal/panics"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// orcExamples is the ORC project's example files in the shared corpus.
func orcExamples(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(corpus.Dir(tb), "orc", "examples")
}

// seedFiles are small example files covering the codecs and types.
var seedFiles = []string{"TestOrcFile.test1.orc", "TestOrcFile.testUnionAndTimestamp.orc", "decimal64_v2.orc",
	"TestOrcFile.testStringAndBinaryStatistics.orc", "TestOrcFile.metaData.orc", "orc_no_format.orc",
	"TestOrcFile.testTimestamp.orc", "complextypes_iceberg.orc"}

func readSeed(f *testing.F, name string) []byte {
	examples := orcExamples(f)
	b, err := os.ReadFile(filepath.Join(examples, name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzTail feeds the tail parser file ends: it must return a tail or an
// error wrapping ErrCorrupt, never panic.
func FuzzTail(f *testing.F) {
	for _, name := range seedFiles {
		b := readSeed(f, name)
		f.Add(b[max(0, len(b)-4096):], int64(len(b)))
	}
	f.Fuzz(func(t *testing.T, tail []byte, size int64) {
		if len(tail) == 0 || size < int64(len(tail)) {
			return
		}
		n, err := tailLength(tail, size)
		if err != nil {
			if !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if n > int64(len(tail)) {
			return
		}
		m, err := parseTail(tail[int64(len(tail))-n:], size)
		if err != nil {
			if !errors.Is(err, formats.ErrCorrupt) && !errors.Is(err, formats.ErrSchema) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if _, err := m.fields(); err != nil {
			return
		}
	})
}

// FuzzDecompress: every codec takes any chunk bytes without a panic, and
// never decodes a chunk to more than the block size.
func FuzzDecompress(f *testing.F) {
	for _, name := range seedFiles {
		b := readSeed(f, name)
		f.Add(uint8(compZlib), b[3:min(len(b), 600)])
	}
	f.Add(uint8(compSnappy), []byte{0x0b, 0, 0, 0x04, 0x0c, 'a', 'b', 'c'})
	f.Add(uint8(compLZ4), []byte{0x0d, 0, 0, 0x30, 'a', 'b', 'c'})
	f.Add(uint8(compZstd), []byte{0x1b, 0, 0, 0x28, 0xb5, 0x2f, 0xfd, 0, 0x58, 0x19, 0, 0, 'a', 'b', 'c'})
	f.Add(uint8(compLZO), []byte{0x0f, 0, 0, 0x14, 'a', 'b', 'c', 0x11, 0, 0})
	f.Fuzz(func(t *testing.T, kind uint8, src []byte) {
		c := codec{kind: uint64(kind % 6), blockSize: 1 << 12}
		out, err := c.decompress(nil, src)
		if err == nil && c.kind != compNone && len(out) > len(src)/3*c.blockSize+c.blockSize {
			t.Fatalf("%d bytes from %d", len(out), len(src))
		}
		if _, err := c.decompressPrefix(src); err != nil {
			return
		}
	})
}

// FuzzRLE: the run-length decoders take any bytes without a panic, and
// skipping n values leaves a decoder where reading them would.
func FuzzRLE(f *testing.F) {
	f.Add(uint8(0), []byte{0x61, 0xff, 0x03, 0x02, 0xfe, 0x07, 0x01}, uint16(5))
	f.Add(uint8(1), []byte{0x0a, 0x27, 0x10}, uint16(3))
	f.Add(uint8(2), []byte{0x5e, 0x03, 0x5c, 0xa1, 0xab, 0x1e, 0xde, 0xad, 0xbe, 0xef}, uint16(4))
	f.Add(uint8(3), []byte{0x8e, 0x09, 0x2b, 0x21, 0x07, 0xd0, 0x1e, 0x00, 0x14, 0x70, 0x28, 0x32, 0x3c, 0x46, 0x50, 0x5a, 0x64, 0x6e, 0x78, 0x82, 0x8c, 0x96, 0xa0, 0xaa, 0xb4, 0xbe, 0xfc, 0xe8}, uint16(7))
	f.Add(uint8(2), []byte{0xc6, 0x09, 0x02, 0x02, 0x22, 0x42, 0x42, 0x46}, uint16(2))
	f.Add(uint8(4), []byte{0xfe, 0x44, 0x45, 0x00, 0x07}, uint16(9))
	f.Fuzz(func(t *testing.T, which uint8, data []byte, skip uint16) {
		n := int(skip % 2048)
		switch which % 6 {
		case 0, 1, 2, 3:
			newR := func() intReader {
				r := newIntReader(which%6 >= 2, which%2 == 0)
				r.reset(data)
				return r
			}
			a, b := newR(), newR()
			all := make([]int64, n+8)
			errAll := a.next(all)
			errSkip := b.skip(n)
			if errAll == nil {
				if errSkip != nil {
					t.Fatalf("skip failed where reading did: %v", errSkip)
				}
				rest := make([]int64, 8)
				if err := b.next(rest); err != nil {
					t.Fatal(err)
				}
				for i := range rest {
					if rest[i] != all[n+i] {
						t.Fatalf("after skipping %d, value %d is %d, not %d", n, i, rest[i], all[n+i])
					}
				}
			}
		case 4:
			var r, s byteRLE
			r.reset(data)
			s.reset(data)
			all := make([]byte, n+4)
			if r.next(all) == nil {
				if err := s.skip(n); err != nil {
					t.Fatal(err)
				}
				rest := make([]byte, 4)
				if err := s.next(rest); err != nil || string(rest) != string(all[n:]) {
					t.Fatalf("skip then read: %v %v, want %v", rest, err, all[n:])
				}
			}
		case 5:
			var r, s boolRLE
			r.reset(data)
			s.reset(data)
			all := make([]bool, n+9)
			if r.next(all) == nil {
				if err := s.skip(n); err != nil {
					t.Fatal(err)
				}
				rest := make([]bool, 9)
				if err := s.next(rest); err != nil {
					t.Fatal(err)
				}
				for i := range rest {
					if rest[i] != all[n+i] {
						t.Fatalf("after skipping %d bits, bit %d differs", n, i)
					}
				}
			}
		}
	})
}

// FuzzFile reads whole files, mutated: every stripe footer, stream and
// column decoder sees the bytes. Any outcome but a panic, a hang or an
// unreleased buffer is fine; errors wrap ErrCorrupt or ErrSchema.
func FuzzFile(f *testing.F) {
	for _, name := range seedFiles {
		if b := readSeed(f, name); len(b) < 64<<10 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		path := filepath.Join(t.TempDir(), "f.orc")
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		ctx := context.Background()
		ds, err := formats.Plan(ctx, []string{path}, formats.PlanOptions{Formats: []formats.Format{Format{}}})
		if err != nil {
			checkErr(t, err)
			return
		}
		defer ds.Close()
		fr := ds.Fragments[0]
		if fr.Rows > 100_000 {
			return // a footer may claim many rows of constant values: slow, not wrong
		}
		err = ds.Read(ctx, 0, ds.RowRange(0, fr.Rows/3, fr.Rows), 1000, mem, func(b arrow.RecordBatch) error {
			b.Release()
			return nil
		})
		if err != nil {
			checkErr(t, err)
		}
	})
}

func checkErr(t *testing.T, err error) {
	if !errors.Is(err, formats.ErrCorrupt) && !errors.Is(err, formats.ErrSchema) && !errors.Is(err, formats.ErrEmpty) {
		t.Fatalf("error without a sentinel: %v", err)
	}
	if pe := (*panics.Error)(nil); errors.As(err, &pe) {
		t.Fatalf("decoder panicked (%v): %v", pe.Value, err)
	}
}
