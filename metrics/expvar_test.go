package metrics

import (
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// expvar names live for the whole process, also across -count runs, so every test takes fresh
// ones.
var expvarNames atomic.Int64

func freshExpvarName() string {
	return fmt.Sprintf("sluice_metrics_test_%d", expvarNames.Add(1))
}

func TestPublishExpvar(t *testing.T) {
	p := New()
	p.AddConsumed(10, 1)
	p.AddRead("mem", 64, 1)
	name := freshExpvarName()
	if err := p.PublishExpvar(name); err != nil {
		t.Fatal(err)
	}

	v := expvar.Get(name)
	if v == nil {
		t.Fatalf("expvar %q not found after publishing", name)
	}
	// The value is read live: later updates show without publishing again.
	p.AddConsumed(5, 1)
	var s Snapshot
	if err := json.Unmarshal([]byte(v.String()), &s); err != nil {
		t.Fatalf("expvar value is not a JSON snapshot: %v\n%s", err, v.String())
	}
	if s.ConsumedRows != 15 || s.ConsumedBatches != 2 || s.Backends["mem"] != (BackendReads{Bytes: 64, Requests: 1}) {
		t.Errorf("expvar snapshot = %+v, want 15 rows in 2 batches and 64 bytes from mem", s)
	}

	err := New().PublishExpvar(name)
	if !errors.Is(err, ErrNameTaken) {
		t.Errorf("publishing %q twice: err = %v, want ErrNameTaken", name, err)
	}
}

func TestPublishExpvarNameTakenByOthers(t *testing.T) {
	name := freshExpvarName()
	expvar.NewInt(name)
	if err := New().PublishExpvar(name); !errors.Is(err, ErrNameTaken) {
		t.Errorf("publishing over another package's expvar: err = %v, want ErrNameTaken", err)
	}
}

func TestPublishExpvarRace(t *testing.T) {
	// Many Pipelines racing for one name: exactly one wins and nothing panics.
	name := freshExpvarName()
	var (
		wg     sync.WaitGroup
		wins   atomic.Int64
		taken  atomic.Int64
		others = make(chan error, 8)
	)
	for range 8 {
		wg.Go(func() {
			switch err := New().PublishExpvar(name); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrNameTaken):
				taken.Add(1)
			default:
				others <- err
			}
		})
	}
	wg.Wait()
	close(others)
	for err := range others {
		t.Errorf("unexpected error: %v", err)
	}
	if wins.Load() != 1 || taken.Load() != 7 {
		t.Errorf("%d publications succeeded and %d were refused, want 1 and 7", wins.Load(), taken.Load())
	}
}
