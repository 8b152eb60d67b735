package unzeroed

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// In a test binary every buffer comes filled with 0xa5, so that a writer
// that leaves a byte unset fails the value checks; buffers are as long as
// asked, with no spare capacity, and Allocator's are aligned as arrow-go's
// Go allocator aligns its own.
func TestBuffers(t *testing.T) {
	for _, n := range []int{1, 7, 64, 100, 4096, 40000, 1 << 20} {
		b := Bytes(n)
		if len(b) != n || cap(b) != n {
			t.Fatalf("Bytes(%d): len %d cap %d", n, len(b), cap(b))
		}
		for i, v := range b {
			if v != 0xa5 {
				t.Fatalf("Bytes(%d)[%d] = %#x, want the test fill", n, i, v)
			}
		}
		for _, a := range [][]byte{Allocator{}.Allocate(n), Allocator{}.AllocateUnzeroed(n), Offer(memory.NewGoAllocator()).(interface{ AllocateUnzeroed(int) []byte }).AllocateUnzeroed(n)} {
			if len(a) != n || cap(a) != n {
				t.Fatalf("allocated %d: len %d cap %d", n, len(a), cap(a))
			}
			if p := uintptr(unsafe.Pointer(&a[0])); p%alignment != 0 {
				t.Fatalf("allocated %d at %#x, not %d-aligned", n, p, alignment)
			}
		}
	}
	if len(Bytes(0)) != 0 || len(Allocator{}.Allocate(0)) != 0 {
		t.Fatal("an empty buffer is not empty")
	}
	grown := Allocator{}.Reallocate(300, append(Allocator{}.Allocate(10)[:0], "0123456789"...))
	if len(grown) != 300 || string(grown[:10]) != "0123456789" {
		t.Fatalf("Reallocate lost the bytes: %q", grown[:10])
	}
}

// Only arrow-go's Go allocator is offered unzeroed buffers: a user's
// allocator sees every buffer, and Allocate of the offered one still
// zeroes.
func TestOffer(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	if Offer(checked) != memory.Allocator(checked) {
		t.Fatal("a checked allocator was replaced")
	}
	if _, ok := Offer(checked).(interface{ AllocateUnzeroed(int) []byte }); ok {
		t.Fatal("a checked allocator offers unzeroed buffers")
	}
	if _, ok := Of(checked); ok {
		t.Fatal("Of gave unzeroed buffers for a checked allocator")
	}
	offered := Offer(memory.DefaultAllocator)
	for i, v := range offered.Allocate(1000) {
		if v != 0 {
			t.Fatalf("Allocate of the offered allocator left byte %d at %#x", i, v)
		}
	}
	for _, mem := range []memory.Allocator{memory.DefaultAllocator, offered, Allocator{}} {
		if got, ok := Of(mem); !ok || got != memory.Allocator(Allocator{}) {
			t.Fatalf("Of(%T) = %T, %v", mem, got, ok)
		}
	}
}

// filling offers a checked allocator's own buffers as unzeroed ones,
// filled, as the value matrix's allocator does.
type filling struct{ memory.Allocator }

func (f filling) AllocateUnzeroed(size int) []byte {
	b := f.Allocate(size)
	for i := range b {
		b[i] = 0xa5
	}
	return b
}

// An allocator that offers unzeroed buffers itself is kept by Offer and
// taken through Allocate by Of: it counts every buffer either way.
func TestOfferer(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer checked.AssertSize(t, 0)
	var f memory.Allocator = filling{checked}
	if Offer(f) != f {
		t.Fatal("Offer replaced an allocator that offers unzeroed buffers itself")
	}
	got, ok := Of(f)
	if !ok {
		t.Fatal("Of did not take the offered unzeroed buffers")
	}
	if again, _ := Of(got); again != got {
		t.Fatal("Of wrapped its own result again")
	}
	b := got.Allocate(100)
	if checked.CurrentAlloc() < 100 {
		t.Fatalf("the checked allocator counts %d bytes, want at least 100", checked.CurrentAlloc())
	}
	for i, v := range b {
		if v != 0xa5 {
			t.Fatalf("byte %d is %#x, want the fill", i, v)
		}
	}
	b = got.Reallocate(300, b)
	got.Free(b)
}

type sayRuntime struct {
	memory.Allocator
	is bool
}

func (s sayRuntime) RuntimeMemory() bool { return s.is }

// sayingFiller is the value matrix's allocator: it offers a checked Go
// allocator's buffers unzeroed and says they are the runtime's.
type sayingFiller struct{ filling }

func (sayingFiller) RuntimeMemory() bool { return true }

type sayPipeline struct {
	memory.Allocator
	is bool
}

func (s sayPipeline) PipelineOnly() bool { return s.is }

// TestRuntimeMemory: the runtime's memory is Go's allocator's, this
// package's over it and an allocator's that says so; not a checked
// allocator's that does not, nor an offering one's of its own. A reader
// may lend the runtime's memory for good (Keep), and take it back only
// where the allocator says its batches are the pipeline's alone (Return);
// anything else is copied.
func TestRuntimeMemory(t *testing.T) {
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	for _, c := range []struct {
		name string
		mem  memory.Allocator
		want bool
		lend Lending
	}{
		{"Go", memory.NewGoAllocator(), true, Keep},
		{"offering", Offer(memory.NewGoAllocator()), true, Keep},
		{"Allocator", Allocator{}, true, Keep},
		{"taking from one that says so", func() memory.Allocator { m, _ := Of(sayingFiller{filling{checked}}); return m }(), true, Keep},
		{"taking from one that does not", func() memory.Allocator { m, _ := Of(filling{checked}); return m }(), false, Copy},
		{"checked", checked, false, Copy},
		{"offering its own", filling{checked}, false, Copy},
		{"says so", sayRuntime{checked, true}, true, Keep},
		{"says not", sayRuntime{memory.NewGoAllocator(), false}, false, Copy},
		{"the pipeline's", sayPipeline{memory.NewGoAllocator(), true}, false, Return},
		{"not the pipeline's", sayPipeline{memory.NewGoAllocator(), false}, false, Copy},
		{"taking from the pipeline's", taking{sayPipeline{checked, true}, sayingFiller{filling{checked}}}, false, Return},
	} {
		if got := RuntimeMemory(c.mem); got != c.want {
			t.Errorf("%s: RuntimeMemory %v, want %v", c.name, got, c.want)
		}
		if got := LendingTo(c.mem); got != c.lend {
			t.Errorf("%s: LendingTo %v, want %v", c.name, got, c.lend)
		}
	}
}
