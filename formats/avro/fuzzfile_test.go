package avro_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/avro/ocf"

	"github.com/sluicedata/sluice/formats/avro"
)

// FuzzFile feeds whole files to the header and block parsers and the
// value decoder: any error, never a panic, a hang or Arrow memory left
// outstanding. Seeds: the files of testdata, files of every type in
// each codec, and files written by hand.
func FuzzFile(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.avro"))
	dir := f.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	rows := []map[string]any{everyRow(rng, 0), everyRow(rng, 1), everyRow(rng, 2)}
	for name, codec := range codecs {
		path := filepath.Join(dir, name+".avro")
		if codec == nil {
			writeOCF(f, dir, name+".avro", everyType, rows)
		} else {
			writeOCF(f, dir, name+".avro", everyType, rows, ocf.WithCodec(codec))
		}
		paths = append(paths, path)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(container(craftedSchema, craftedBlocks(2, 0, 3)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = avro.ReadBytes(t, data) // any error; Inspect wraps ErrCorrupt
	})
}
