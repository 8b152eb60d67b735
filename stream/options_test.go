package stream

import (
	"runtime"
	"testing"
)

// The concurrency defaults scale with the cores and, on the 2 cores they
// were tuned on, are the values measured there. The fetch stage's depth is
// not a count: FetchConcurrency stays 0 (the bytes ahead follow the
// latency, within FetchAheadBytes, whatever the cores).
func TestDefaultsScaleWithCores(t *testing.T) {
	type conc struct{ read, fetch, transform, batches, windows int }
	for _, tc := range []struct {
		name  string
		procs int
		in    Options
		want  conc
	}{
		{"1 core", 1, Options{}, conc{2, 0, 1, 4, 3}},
		{"2 cores: as tuned", 2, Options{}, conc{2, 0, 2, 8, 3}},
		{"16 cores", 16, Options{}, conc{16, 0, 16, 64, 17}},
		{"128 cores", 128, Options{}, conc{128, 0, 128, 512, 129}},
		{"no cores reported", 0, Options{}, conc{2, 0, 1, 4, 3}},
		// What depends on the decoders follows a ReadConcurrency set by
		// hand, not the cores.
		{"ReadConcurrency set", 2, Options{Limits: Limits{ReadConcurrency: 16}}, conc{16, 0, 2, 8, 17}},
		{"all set", 16, Options{Limits: Limits{ReadConcurrency: 3, FetchConcurrency: 5, TransformConcurrency: 7, PrefetchBatches: 9, PrefetchWindows: 11}}, conc{3, 5, 7, 9, 11}},
	} {
		tc.in.URLs = []string{"mem://x"}
		o, err := tc.in.withDefaultsFor(tc.procs)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := conc{o.Limits.ReadConcurrency, o.Limits.FetchConcurrency, o.Limits.TransformConcurrency, o.Limits.PrefetchBatches, o.Limits.PrefetchWindows}
		if got != tc.want {
			t.Errorf("%s: (read, fetch, transform, batches, windows) = %v, want %v", tc.name, got, tc.want)
		}
		if o.Limits.PrefetchBytes != tc.in.Limits.PrefetchBytes {
			t.Errorf("%s: PrefetchBytes %d, want it left at %d", tc.name, o.Limits.PrefetchBytes, tc.in.Limits.PrefetchBytes)
		}
		if o.Limits.FetchAheadBytes != 256<<20 {
			t.Errorf("%s: FetchAheadBytes %d, want 256 MiB", tc.name, o.Limits.FetchAheadBytes)
		}
	}
}

// withDefaults reads GOMAXPROCS when it is called (at Open), not when the
// process started.
func TestDefaultsFollowGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	o, err := Options{URLs: []string{"mem://x"}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Limits.ReadConcurrency != 3 || o.Limits.TransformConcurrency != 3 || o.Limits.PrefetchWindows != 4 {
		t.Errorf("at GOMAXPROCS 3: ReadConcurrency %d, TransformConcurrency %d, PrefetchWindows %d; want 3, 3, 4",
			o.Limits.ReadConcurrency, o.Limits.TransformConcurrency, o.Limits.PrefetchWindows)
	}
}

func TestOptionsRejectNegativeConcurrency(t *testing.T) {
	for _, l := range []Limits{{ReadConcurrency: -1}, {FetchConcurrency: -1}, {FetchAheadBytes: -1}, {PrefetchWindows: -2}, {PlanConcurrency: -1}} {
		o := Options{URLs: []string{"mem://x"}, Limits: l}
		if _, err := o.withDefaultsFor(4); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
}
