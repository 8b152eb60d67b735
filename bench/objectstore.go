package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/scratch"
)

// objectStoreOrders are the two ways each object store is streamed: with
// default options (the brief's target) and shuffled as the shuffled
// scenario is.
var objectStoreOrders = []struct {
	name    string
	shuffle bool
}{{"sequential", false}, {"shuffled", true}}

// objectStoreLines are the lines of the object_stores scenario, in order.
var objectStoreLines = func() []string {
	var lines []string
	for _, be := range scratch.Backends {
		for _, o := range objectStoreOrders {
			lines = append(lines, objectStoreLine(be, o.name))
		}
	}
	return append(lines, cachedLines...)
}()

func objectStoreLine(be scratch.Backend, order string) string {
	return strings.ToLower(be.Name) + "_" + order
}

// objectStores streams the dataset from each object-store server whose
// bucket URL is in the environment (scripts/objectstores.sh starts local
// ones), alternating with the same stream of the local files, and compares
// the fastest of each. The files are uploaded under a fresh prefix first,
// which is deleted afterwards. A backend without its variable gets lines
// that say how to start it.
func (e *env) objectStores(ctx context.Context) error {
	for _, be := range scratch.Backends {
		if be.URL() == "" {
			for _, o := range objectStoreOrders {
				r := newRecord("scenario").set("scenario", objectStoreLine(be, o.name))
				if err := e.emit(r.set("skipped", "run "+scratch.Setup)); err != nil {
					return err
				}
			}
			continue
		}
		if err := e.objectStore(ctx, be); err != nil {
			return fmt.Errorf("%s: %w", be.Name, err)
		}
	}
	return e.cachedS3(ctx)
}

// withUploaded copies the bench's files to a fresh scratch prefix of be,
// runs f on it with the files' total size, and deletes the prefix, whatever
// f returned.
func (e *env) withUploaded(ctx context.Context, be scratch.Backend, purpose string, f func(sc *scratch.Prefix, bytes int64) error) (err error) {
	sc, err := scratch.New(ctx, be, purpose)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := sc.Close(cctx); err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	var total int64
	for _, path := range e.data.files {
		if err := upload(ctx, sc, path); err != nil {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		total += st.Size()
	}
	e.cfg.Log.Info("uploaded", "backend", be.Name, "files", len(e.data.files), "seconds", time.Since(start).Seconds())
	return f(sc, total)
}

func (e *env) objectStore(ctx context.Context, be scratch.Backend) error {
	return e.withUploaded(ctx, be, "sluice-bench", func(sc *scratch.Prefix, _ int64) error { return e.objectStoreOrders(ctx, be, sc) })
}

// objectStoreOrders streams the uploaded files in each order, alternating
// with the local files.
func (e *env) objectStoreOrders(ctx context.Context, be scratch.Backend, sc *scratch.Prefix) error {
	for _, order := range objectStoreOrders {
		o := e.opts()
		if order.shuffle {
			o.Shuffle, o.Seed = true, 42
		}
		once := func(url string) (measurement, error) {
			runtime.GC()
			m, err := measureStream(ctx, streamRun{urls: []string{url}, opts: o})
			if err == nil {
				err = expectRows(m, e.data.spec.Rows())
			}
			return m, err
		}
		var local, store measurement
		var localRates, storeRates []float64
		for i := range max(e.cfg.Reps, 1) {
			l, err := once(e.data.dir)
			if err != nil {
				return fmt.Errorf("local files: %w", err)
			}
			s, err := once(sc.URL(""))
			if err != nil {
				return err
			}
			localRates, storeRates = append(localRates, l.rowsPerSec()), append(storeRates, s.rowsPerSec())
			if i == 0 || l.rowsPerSec() > local.rowsPerSec() {
				local = l
			}
			if i == 0 || s.rowsPerSec() > store.rowsPerSec() {
				store = s
			}
		}
		r := e.result(objectStoreLine(be, order.name), sample{m: store, rates: storeRates, baseline: e.floor})
		opts := "defaults"
		if order.shuffle {
			opts = "Shuffle, Seed 42"
		}
		r.set("options", opts+fmt.Sprintf("; from %s, alternating with the same stream of the local files", be.Name))
		r.set("local_rows_per_s", local.rowsPerSec())
		r.set("local_runs_rows_per_s", roundAll(localRates))
		r.set("ratio_vs_local", store.rowsPerSec()/local.rowsPerSec())
		r.set("row_groups", store.rowGroups)
		r.set("data_requests", store.readRequests-store.planRequests)
		r.set("requests_per_row_group", float64(store.readRequests-store.planRequests)/float64(store.rowGroups))
		if be.Name == scratch.S3.Name && !order.shuffle {
			r.target("ratio_vs_local", ">=", 0.7).target("io_amplification", "<=", 1.05)
		}
		if err := e.emit(r); err != nil {
			return err
		}
	}
	return nil
}

// upload copies a local file to the scratch prefix under its base name.
func upload(ctx context.Context, sc *scratch.Prefix, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := sc.Bucket.NewWriter(ctx, sc.Key+filepath.Base(path), nil)
	if err != nil {
		return fmt.Errorf("upload %s: %w", filepath.Base(path), err)
	}
	if _, err := io.Copy(w, f); err != nil {
		w.Close()
		return fmt.Errorf("upload %s: %w", filepath.Base(path), err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", filepath.Base(path), err)
	}
	return nil
}
