package planner

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluicedata/sluice/formats"
)

func FuzzDecodeSharedPlan(f *testing.F) {
	good, _ := json.Marshal(Object{Version: 1, Plan: "p", Columns: []string{"a"}, Files: []File{{URL: "file:///a", Size: 10, Rows: 2, Footer: "d"}},
		Cache: []CacheEntry{{Key: []byte("k"), Value: []byte{0, 1, 2}}}})
	v2, _ := sampleObject().MarshalBinary()
	for _, s := range [][]byte{good, v2, v2[:len(v2)/2], []byte(objectMagic), []byte("{}"), []byte(`{"version":1,"plan":"p","files":[]}`), []byte("null"), []byte(`{"files":null}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sp, err := decodeSharedPlan(raw)
		if err != nil {
			if !errors.Is(err, formats.ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if sp.Version < 1 || sp.Version > Version || len(sp.Files) == 0 || sp.Plan == "" {
			t.Fatalf("accepted %+v", sp)
		}
		_ = sp.cacheMap()
		_ = sp.check(sp)
	})
}
