package formats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNotAsKnown is wrapped when a file's footer says other units, rows or
// schema than PlanOptions.Known gave for it: the plan that described the
// file was made of other bytes, or by a driver set otherwise (a Parquet
// driver's INT96 or ArrowGoDecode), so its rows would not be this
// plan's. stream.ErrPlanMismatch wraps it where a shared plan is the
// description.
var ErrNotAsKnown = errors.New("the file is not as the plan described it")

// KnownFile is what an earlier plan found in a file's footer, given back
// through PlanOptions.Known so that planning takes it instead of reading
// and parsing the footer: a job's ranks sharing one plan each parse the
// footers of the files they read, not of every file.
type KnownFile struct {
	// Units and Rows are what the driver's Inspect gave, before a mask or
	// a filter changed their counts (Fragment.Inspected).
	Units []Unit
	Rows  int64
	// SchemaOf is the URL of another file of the plan whose schema (with
	// its metadata) equals this file's: that file is inspected at plan
	// time, and this one takes its schema. "" (or the file's own URL):
	// the file is inspected at plan time, and what it says is checked
	// against Units and Rows.
	SchemaOf string
}

// lateInspect is a fragment planned from a KnownFile: its driver's Meta is
// made when the fragment is first read (Fragment.inspectLate).
type lateInspect struct {
	columns []string
	known   KnownFile
	mu      sync.Mutex
	done    atomic.Bool
}

// Inspected is what the fragment's driver found in its footer: its units
// and rows before a mask or a filter changed their counts, which a later
// plan takes back through PlanOptions.Known (SchemaOf is left for the
// caller to set).
func (f *Fragment) Inspected() KnownFile { return f.inspected }

// known is the KnownFile opts.Known gives f, and whether f takes it:
// not where its format settles its files together (Settler: a text
// format's schema is a function of every file's sample).
func (o *PlanOptions) known(f *Fragment) (KnownFile, bool) {
	if o.Known == nil {
		return KnownFile{}, false
	}
	if _, ok := f.format.(Settler); ok {
		return KnownFile{}, false
	}
	return o.Known(f)
}

// matches returns an error naming the first difference between what the
// driver found (units, rows) and k.
func (k KnownFile) matches(url string, units []Unit, rows int64) error {
	if rows != k.Rows {
		return fmt.Errorf("formats: %s: %w: its footer has %d rows, the plan %d", url, ErrNotAsKnown, rows, k.Rows)
	}
	if len(units) != len(k.Units) {
		return fmt.Errorf("formats: %s: %w: its footer has %d units, the plan %d", url, ErrNotAsKnown, len(units), len(k.Units))
	}
	for i, u := range units {
		if u != k.Units[i] {
			return fmt.Errorf("formats: %s: %w: unit %d is %+v in its footer, %+v in the plan", url, ErrNotAsKnown, i, u, k.Units[i])
		}
	}
	return nil
}

// inspectLate has the driver inspect a fragment planned from a KnownFile,
// once, before its first read: the driver's Meta is made then, and what
// the footer says is checked against what the plan said. An error is not
// kept (a cancelled read must not spoil the fragment for the next).
func (f *Fragment) inspectLate(ctx context.Context) error {
	l := f.late
	if l == nil || l.done.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done.Load() {
		return nil
	}
	// A copy, so that the fragment's units and schema, which reads use
	// meanwhile, stay as planned.
	g := &Fragment{URL: f.URL, Rel: f.Rel, Format: f.Format, Size: f.Size, Source: f.Source, format: f.format, cache: f.cache}
	if err := guard(f.URL, inspectedPart(f.format), func() error { return f.format.Inspect(ctx, g, l.columns) }); err != nil {
		return err
	}
	if err := l.known.matches(f.URL, g.Units, g.Rows); err != nil {
		return err
	}
	if !g.Schema.Equal(f.Schema) || !g.Schema.Metadata().Equal(f.Schema.Metadata()) {
		return fmt.Errorf("formats: %s: %w: its schema is %s, the plan's (that of %s) %s", f.URL, ErrNotAsKnown, g.Schema, l.known.SchemaOf, f.Schema)
	}
	f.Meta = g.Meta
	l.done.Store(true)
	return nil
}

// unitsCopy is units cloned where later planning changes their counts in
// place (a mask, a filter), so that Inspected keeps the driver's.
func unitsCopy(units []Unit, changed bool) []Unit {
	if changed {
		return slices.Clone(units)
	}
	return units
}

// lateFragments are the KnownFile of every fragment opts.Known knows, and
// of those the ones inspected late, each with the fragment whose schema it
// takes: one inspected at plan time (a fragment whose SchemaOf names no
// such fragment is inspected at plan time itself).
func lateFragments(frags []*Fragment, opts PlanOptions) (map[*Fragment]KnownFile, map[*Fragment]*Fragment) {
	known := map[*Fragment]KnownFile{}
	byURL := map[string]*Fragment{}
	for _, f := range frags {
		if k, ok := opts.known(f); ok {
			known[f] = k
		}
		byURL[f.URL] = f
	}
	late := map[*Fragment]*Fragment{}
	for f, k := range known {
		of := byURL[k.SchemaOf]
		if of == nil || of == f {
			continue
		}
		if ko, ok := known[of]; ok && ko.SchemaOf != "" && ko.SchemaOf != of.URL {
			continue // the schema's file is late itself: inspect this one
		}
		late[f] = of
	}
	return known, late
}
