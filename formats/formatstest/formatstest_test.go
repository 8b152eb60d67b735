package formatstest_test

import (
	"context"
	"io"
	"iter"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/sluicedata/sluice/formats"
	"github.com/sluicedata/sluice/formats/formatstest"
	"github.com/sluicedata/sluice/internal/testkit/arrowfile"
)

func TestMain(m *testing.M) {
	if os.Getenv(faultEnv) != "" {
		// A child of TestCatches, whose suite fails and may leave a hung
		// driver's goroutine behind.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}

// writeIPC writes rec as an Arrow IPC file of unitRows-row batches.
func writeIPC(w io.Writer, rec arrow.RecordBatch, unitRows int) error {
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(rec.Schema()))
	if err != nil {
		return err
	}
	for at := int64(0); at < rec.NumRows(); at += int64(unitRows) {
		part := rec.NewSlice(at, min(at+int64(unitRows), rec.NumRows()))
		err := fw.Write(part)
		part.Release()
		if err != nil {
			return err
		}
	}
	return fw.Close()
}

// The suite passes a driver that keeps the contract: the Arrow IPC test
// driver, with its counts known and hidden.
func TestArrowFile(t *testing.T) {
	for _, hide := range []bool{false, true} {
		name := map[bool]string{false: "Counts", true: "HiddenCounts"}[hide]
		t.Run(name, func(t *testing.T) {
			formatstest.Run(t, formatstest.Driver{
				Formats: []formats.Format{arrowfile.Format{HideCounts: hide}},
				Ext:     ".arrow",
				Write:   writeIPC,
			})
		})
	}
}

// faultEnv names the fault a child of TestCatches runs the suite over.
const faultEnv = "FORMATSTEST_FAULT"

// The suite fails a driver that breaks the contract, each fault with a
// failure that says what is wrong. Each runs in a child process, as a
// failing suite fails its test.
func TestCatches(t *testing.T) {
	if fault := os.Getenv(faultEnv); fault != "" {
		formatstest.Hang = 2 * time.Second
		formatstest.Run(t, formatstest.Driver{
			Name:    "broken",
			Formats: []formats.Format{&broken{Format: arrowfile.Format{HideCounts: true}, fault: fault}},
			Ext:     ".arrow",
			Write:   writeIPC,
		})
		return
	}
	if testing.Short() {
		t.Skip("runs the suite six times")
	}
	for _, c := range []struct{ fault, want string }{
		{"drops", "got the rows [0-698] (699 rows), want [0-699] (700 rows)"},
		{"repeats", "got the rows"},
		{"wrong", `s = "wrong", want`},
		{"skips", "rows of a file as written reported skipped"},
		{"hangs", "the driver hangs"},
		{"aliases", "batches kept past their fetch's release"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCatches$")
			cmd.Env = append(os.Environ(), faultEnv+"="+c.fault)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a driver that %s:\n%s", c.fault, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("the suite failed a driver that %s without saying %q:\n%s", c.fault, c.want, out)
			}
		})
	}
}

// broken is the IPC test driver (counts hidden, so that the planner cannot
// count for it) with one fault.
type broken struct {
	arrowfile.Format
	fault string
}

func (b *broken) Inspect(ctx context.Context, f *formats.Fragment, columns []string) error {
	if b.fault == "hangs" && strings.Contains(f.URL, "damaged") {
		select {} // deaf to ctx: the suite must not wait for it
	}
	return b.Format.Inspect(ctx, f, columns)
}

func (b *broken) Fetch(ctx context.Context, f *formats.Fragment, r *formats.Read) (formats.Buffer, error) {
	if b.fault != "aliases" {
		return nil, nil
	}
	// The decoded batches are held as the fetch's buffer and handed out as
	// they are; recycling them overwrites their values.
	rr := *r
	rr.BatchRows, rr.Mem, rr.Filter = 100, memory.DefaultAllocator, nil
	buf := &held{rng: r.Range}
	for rec, err := range b.Format.Decode(ctx, f, nil, &rr) {
		if err != nil {
			buf.Recycle()
			return nil, err
		}
		buf.recs = append(buf.recs, rec)
	}
	return buf, nil
}

func (b *broken) Decode(ctx context.Context, f *formats.Fragment, fetched formats.Buffer, r *formats.Read) iter.Seq2[arrow.RecordBatch, error] {
	if h, ok := fetched.(*held); ok && h.rng == r.Range && r.BatchRows >= 100 {
		return func(yield func(arrow.RecordBatch, error) bool) {
			for _, rec := range h.recs {
				rec.Retain()
				if !yield(rec, nil) {
					return
				}
			}
		}
	}
	inner := b.Format.Decode(ctx, f, nil, r)
	return func(yield func(arrow.RecordBatch, error) bool) {
		var last arrow.RecordBatch
		first := true
		for rec, err := range inner {
			if err != nil {
				yield(nil, err)
				return
			}
			switch b.fault {
			case "repeats":
				if first {
					rec.Retain()
					if !yield(rec, nil) {
						rec.Release()
						return
					}
				}
			case "wrong":
				rec = wrongS(rec)
			case "skips":
				if first && r.Skipped != nil {
					r.Skipped(1)
				}
			case "drops":
				// Hold each batch back to drop the read's last row.
				rec, last = last, rec
				if rec == nil {
					continue
				}
			}
			first = false
			if !yield(rec, nil) {
				if last != nil {
					last.Release()
				}
				return
			}
		}
		if last != nil {
			if last.NumRows() > 1 {
				yield(last.NewSlice(0, last.NumRows()-1), nil)
			}
			last.Release()
		}
	}
}

// wrongS is rec with column s of its first row "wrong". It takes rec.
func wrongS(rec arrow.RecordBatch) arrow.RecordBatch {
	defer rec.Release()
	idx := rec.Schema().FieldIndices("s")
	cols := rec.Columns()
	old := cols[idx[0]].(*array.String)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range old.Len() {
		switch {
		case i == 0:
			b.Append("wrong")
		case old.IsNull(i):
			b.AppendNull()
		default:
			b.Append(old.Value(i))
		}
	}
	s := b.NewArray()
	defer s.Release()
	out := make([]arrow.Array, len(cols))
	copy(out, cols)
	out[idx[0]] = s
	return array.NewRecordBatch(rec.Schema(), out, rec.NumRows())
}

// held is the "aliases" fault's buffer: decoded batches.
type held struct {
	rng  formats.Range
	recs []arrow.RecordBatch
	once sync.Once
}

func (h *held) Size() int64 { return 1 }

// Recycle overwrites the f64 values of the held batches, as a reused
// buffer would be overwritten by the next fetch.
func (h *held) Recycle() {
	h.once.Do(func() {
		for _, rec := range h.recs {
			for i, f := range rec.Schema().Fields() {
				if f.Name == "f64" {
					clear(rec.Column(i).Data().Buffers()[1].Bytes())
				}
			}
			rec.Release()
		}
	})
}
