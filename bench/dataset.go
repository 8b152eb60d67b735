package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// dataset is the generated data the scenarios read.
type dataset struct {
	root       string   // where the harness keeps its datasets (-data, or temporary)
	dir        string   // the directory of part files: the stream's URL
	files      []string // absolute paths of the part files, in order
	spec       synth.Spec
	generated  bool    // false when reused from -data
	genSeconds float64 // time spent writing it
}

// specFile sits beside the part files and records the spec they were
// written with; its leading underscore keeps it out of directory listings.
const specFile = "_spec.json"

// prepareData writes the dataset of cfg into a temporary directory, or
// under cfg.DataDir where a dataset of the same spec is reused. cleanup
// removes what is temporary.
func prepareData(ctx context.Context, cfg config) (*dataset, func(), error) {
	cleanup := func() {}
	root := cfg.DataDir
	if root == "" {
		tmp, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return nil, nil, err
		}
		root = tmp
		cleanup = func() { os.RemoveAll(tmp) }
	}
	d, err := writeData(ctx, cfg, root, cfg.Spec)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return d, cleanup, nil
}

// writeData writes the dataset of spec into a directory under root named
// after the spec, or reuses the one there if it was written with the same
// spec. Datasets other than the main one (as the splits64 scenario's) go
// beside it, so -data keeps them too.
func writeData(ctx context.Context, cfg config, root string, s synth.Spec) (*dataset, error) {
	name := fmt.Sprintf("f%d-r%d-g%d-seed%d", s.Files, s.RowsPerFile, s.RowGroupRows, s.Seed)
	// The variants of one size are different files: each needs its name.
	if s.PageIndex {
		name += "-pageindex"
	} else if s.SmallPages {
		name += "-smallpages"
	}
	d := &dataset{root: root, dir: filepath.Join(root, name), spec: s}
	for i := range s.Files {
		d.files = append(d.files, filepath.Join(d.dir, synth.FileName(i)))
	}
	if sameSpec(d.dir, s) {
		cfg.Log.Info("reusing dataset", "dir", d.dir, "rows", s.Rows())
		return d, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg.Log.Info("writing dataset", "dir", d.dir, "files", s.Files, "rows", s.Rows())
	start := time.Now()
	if err := os.RemoveAll(d.dir); err != nil {
		return nil, err
	}
	if err := synth.WriteDir(d.dir, s); err != nil {
		return nil, fmt.Errorf("write dataset: %w", err)
	}
	d.generated = true
	d.genSeconds = time.Since(start).Seconds()
	marker, err := json.Marshal(s)
	if err == nil {
		err = os.WriteFile(filepath.Join(d.dir, specFile), marker, 0o644)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// sameSpec reports whether dir holds a complete dataset written with s.
func sameSpec(dir string, s synth.Spec) bool {
	raw, err := os.ReadFile(filepath.Join(dir, specFile))
	if err != nil {
		return false
	}
	var got synth.Spec
	if json.Unmarshal(raw, &got) != nil || got != s {
		return false
	}
	for i := range s.Files {
		if _, err := os.Stat(filepath.Join(dir, synth.FileName(i))); err != nil {
			return false
		}
	}
	return true
}

// quarter is the first quarter of the files (at least one): the dataset D
// whose four-times-larger sibling is the whole dataset.
func (d *dataset) quarter() []string { return d.files[:max(1, len(d.files)/4)] }

// quarterRows is the row count of quarter().
func (d *dataset) quarterRows() int64 {
	return int64(len(d.quarter())) * int64(d.spec.RowsPerFile)
}
