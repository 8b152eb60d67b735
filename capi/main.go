//go:build cgo

// Command capi is sluice's C ABI, built as a shared library for the Python
// package (python/) and any other language with a C FFI:
//
//	go build -buildmode=c-shared -o libsluice.so ./capi
//
// Datasets and mixes are named by int64 handles. Every function returns
// NULL on success or an error as a C string "kind\tmessage" that the caller
// frees with sluice_free; kinds are listed in errors.go. No Go panic crosses
// the boundary: each call recovers and reports kind "internal". Batches are
// Arrow C Data Interface arrays (a struct array of the columns); the schema
// is exported once per handle. An exported array shares the batch's
// buffers, which stay alive until the caller calls the array's release
// callback.
package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/cdata"

	// Python reads whatever URL it is given, as the command does: every
	// cloud backend is linked.
	_ "github.com/sluicedata/sluice/storage/azure"
	_ "github.com/sluicedata/sluice/storage/gcs"
	_ "github.com/sluicedata/sluice/storage/s3"
)

func main() {}

// abiVersion changes whenever a signature or the meaning of a value does:
// the Python package refuses a library of another version.
const abiVersion = 5

//export sluice_abi_version
func sluice_abi_version() C.int64_t { return abiVersion }

// cerr turns err into the C error string, or NULL.
func cerr(err error) *C.char {
	if err == nil {
		return nil
	}
	return C.CString(kindOf(err) + "\t" + err.Error())
}

// guard recovers a panic into *out: every exported function defers it.
func guard(out **C.char) {
	if r := recover(); r != nil {
		*out = cerr(panicErr(r))
	}
}

//export sluice_free
func sluice_free(p unsafe.Pointer) { C.free(p) }

//export sluice_open
func sluice_open(opts *C.char, out *C.int64_t) (e *C.char) {
	defer guard(&e)
	id, err := openDataset([]byte(C.GoString(opts)))
	if err != nil {
		return cerr(err)
	}
	*out = C.int64_t(id)
	return nil
}

//export sluice_mix
func sluice_mix(opts *C.char, out *C.int64_t) (e *C.char) {
	defer guard(&e)
	id, err := openMix([]byte(C.GoString(opts)))
	if err != nil {
		return cerr(err)
	}
	*out = C.int64_t(id)
	return nil
}

//export sluice_close
func sluice_close(id C.int64_t) (e *C.char) {
	defer guard(&e)
	return cerr(closeHandle(int64(id)))
}

// sluice_schema fills schema (a zeroed struct ArrowSchema) with the schema
// of every batch, as a struct of the columns.
//
//export sluice_schema
func sluice_schema(id C.int64_t, schema unsafe.Pointer) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	cdata.ExportArrowSchema(h.schema(), (*cdata.CArrowSchema)(schema))
	return nil
}

// sluice_next waits up to timeout_ms for the next batches, up to most of
// them: those ready. Batches that follow one another in memory (the
// batches cut from one window) cross as one array of all their rows: it
// fills arrays (room for most zeroed struct ArrowArrays) with *runs such
// arrays, and batches (room for 3 * most) with three numbers per batch:
// its array, its first row there and its rows; counts[0] is the batches
// and counts[1] the arrays. At the end of the epoch it sets counts[0] to 0
// (the next call starts the next epoch); when none came in time, to -1
// (call again: the caller gets control back to handle signals). First it releases the nrelease arrays
// at release, as sluice_release does: arrays of earlier calls whose last
// view the caller let go of since, released here rather than each with a
// call of its own.
//
//export sluice_next
func sluice_next(id C.int64_t, arrays unsafe.Pointer, most C.int64_t, batches *C.int64_t, timeoutMs C.int64_t, counts *C.int64_t, release *unsafe.Pointer, nrelease C.int64_t) (e *C.char) {
	defer guard(&e)
	out := unsafe.Slice(counts, 2)
	count, runs := &out[0], &out[1]
	releaseArrays(release, nrelease)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	g, err := h.nextGroup(int(most), time.Duration(timeoutMs)*time.Millisecond)
	switch {
	case err == errNotReady:
		*count = -1
		return nil
	case err != nil:
		return cerr(err)
	case g == nil:
		*count = 0
		return nil
	}
	info := unsafe.Slice(batches, 3*len(g.rows))
	for i := range g.rows {
		info[3*i], info[3*i+1], info[3*i+2] = C.int64_t(g.run[i]), C.int64_t(g.start[i]), C.int64_t(g.rows[i])
	}
	// Every run is made exportable before any is handed over: an error
	// leaves the caller nothing to release.
	ready := make([]arrow.RecordBatch, len(g.runs))
	for i, r := range g.runs {
		if ready[i], err = exportable(r); err != nil {
			for _, r := range g.runs[i:] {
				r.Release()
			}
			for _, o := range ready[:i] {
				o.Release()
			}
			return cerr(err)
		}
		r.Release()
	}
	for i, r := range ready {
		cdata.ExportArrowRecordBatch(r, (*cdata.CArrowArray)(unsafe.Add(arrays, i*int(unsafe.Sizeof(cdata.CArrowArray{})))), nil)
		r.Release()
	}
	*runs = C.int64_t(len(g.runs))
	*count = C.int64_t(len(g.rows))
	return nil
}

// sluice_release calls the release callback of each of the n exported
// arrays whose addresses are at arrays (skipping NULLs and arrays released
// already): one call for many, where a callback each would cross into Go
// once for each array.
//
//export sluice_release
func sluice_release(arrays *unsafe.Pointer, n C.int64_t) (e *C.char) {
	defer guard(&e)
	releaseArrays(arrays, n)
	return nil
}

func releaseArrays(arrays *unsafe.Pointer, n C.int64_t) {
	if n <= 0 || arrays == nil {
		return
	}
	for _, a := range unsafe.Slice(arrays, int(n)) {
		if a != nil {
			cdata.ReleaseCArrowArray((*cdata.CArrowArray)(a))
		}
	}
}

// exportBatch hands b to the caller, who owns it from here: the export
// holds its own references, released by the array's release callback.
func exportBatch(b arrow.RecordBatch, array unsafe.Pointer) error {
	defer b.Release()
	out, err := exportable(b)
	if err != nil {
		return err
	}
	defer out.Release()
	cdata.ExportArrowRecordBatch(out, (*cdata.CArrowArray)(array), nil)
	return nil
}

// sluice_stop ends a running iteration and every goroutine of it, keeping
// the position (the batches received): batches it had read ahead come with
// the next calls.
//
//export sluice_stop
func sluice_stop(id C.int64_t) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	h.stopIter()
	return nil
}

// sluice_state returns the position as encoded bytes (checkpoint.Encode,
// or EncodeMix for a mix) in *out, *n bytes, freed with sluice_free: the
// position after the batches received, less the last undelivered of the
// last sluice_next (those the caller holds and has handed on to no one).
//
//export sluice_state
func sluice_state(id C.int64_t, undelivered C.int64_t, out *unsafe.Pointer, n *C.int64_t) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	b, err := h.stateAt(int(undelivered))
	if err != nil {
		return cerr(err)
	}
	*out = C.CBytes(b)
	*n = C.int64_t(len(b))
	return nil
}

//export sluice_load_state
func sluice_load_state(id C.int64_t, buf unsafe.Pointer, n C.int64_t) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	return cerr(h.loadState(C.GoBytes(buf, C.int(n))))
}

// sluice_merge_states merges the encoded states of all ranks of one step
// (checkpoint.Merge, or MergeMix where mix is nonzero) into one that
// resumes at any world size dividing NumSplits.
//
//export sluice_merge_states
func sluice_merge_states(bufs *unsafe.Pointer, lens *C.int64_t, count C.int64_t, mix C.int, out *unsafe.Pointer, n *C.int64_t) (e *C.char) {
	defer guard(&e)
	ps := unsafe.Slice(bufs, int(count))
	ls := unsafe.Slice(lens, int(count))
	states := make([][]byte, len(ps))
	for i := range ps {
		states[i] = C.GoBytes(ps[i], C.int(ls[i]))
	}
	b, err := mergeStates(states, mix != 0)
	if err != nil {
		return cerr(err)
	}
	*out = C.CBytes(b)
	*n = C.int64_t(len(b))
	return nil
}

// sluice_info returns JSON about the handle (epoch, fingerprint, splits,
// rank) in *out, freed with sluice_free.
//
//export sluice_info
func sluice_info(id C.int64_t, out **C.char) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	b, err := json.Marshal(h.info())
	if err != nil {
		return cerr(err)
	}
	*out = C.CString(string(b))
	return nil
}

// sluice_metrics returns the dataset's metrics snapshot as JSON in *out,
// freed with sluice_free. The consumed rows and batches are those
// delivered: less those read ahead, and the last undelivered of the last
// sluice_next.
//
//export sluice_metrics
func sluice_metrics(id C.int64_t, undelivered C.int64_t, out **C.char) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	if h.ds == nil {
		return cerr(usageErr("sluice: a mix has no metrics of its own; ask its sources"))
	}
	s := h.ds.Metrics().Snapshot()
	rows, batches := h.ahead(int(undelivered))
	s.ConsumedRows -= rows
	s.ConsumedBatches -= batches
	b, err := json.Marshal(s)
	if err != nil {
		return cerr(err)
	}
	*out = C.CString(string(b))
	return nil
}

// sluice_estimate returns, as JSON in *out (freed with sluice_free), what
// the dataset's shuffle costs and gives in the current epoch
// (stream.Dataset.Estimate), read from the plan without reading data.
//
//export sluice_estimate
func sluice_estimate(id C.int64_t, out **C.char) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	est, err := h.estimate()
	if err != nil {
		return cerr(err)
	}
	b, err := json.Marshal(est)
	if err != nil {
		return cerr(err)
	}
	*out = C.CString(string(b))
	return nil
}

// sluice_set_epoch moves to the start of an epoch.
//
//export sluice_set_epoch
func sluice_set_epoch(id C.int64_t, epoch C.int64_t) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	if h.ds == nil {
		return cerr(usageErr("sluice: set_epoch of a mix: load a state instead"))
	}
	h.dropIter()
	return cerr(h.ds.SetEpoch(int64(epoch)))
}

// sluice_take fills array with the rows at the given positions of an
// epoch's order (stream.Dataset.Take).
//
//export sluice_take
func sluice_take(id C.int64_t, epoch C.int64_t, positions *C.int64_t, count C.int64_t, array unsafe.Pointer) (e *C.char) {
	defer guard(&e)
	h, err := lookup(int64(id))
	if err != nil {
		return cerr(err)
	}
	if h.ds == nil {
		return cerr(usageErr("sluice: take from a mix is not supported: take from its sources"))
	}
	pos := make([]int64, int(count))
	if count > 0 {
		for i, p := range unsafe.Slice(positions, int(count)) {
			pos[i] = int64(p)
		}
	}
	b, err := h.ds.Take(context.Background(), int64(epoch), pos)
	if err != nil {
		return cerr(err)
	}
	return cerr(exportBatch(b, array))
}

// sluice_rank_from_env returns, as JSON in *out (freed with sluice_free),
// where the launcher placed this process (stream.RankFromEnv: torchrun,
// Slurm, Open MPI, Kubernetes), or {"launcher": ""} when none did. env is
// the environment as a JSON object: the caller's, since the Go runtime's
// copy is the one it had when the library was loaded.
//
//export sluice_rank_from_env
func sluice_rank_from_env(env *C.char, out **C.char) (e *C.char) {
	defer guard(&e)
	b, err := rankFromEnv([]byte(C.GoString(env)))
	if err != nil {
		return cerr(err)
	}
	*out = C.CString(string(b))
	return nil
}
