package synth

import (
	"encoding/json"
	"strings"
	"testing"
)

// Bench records a dataset's spec as JSON beside its files and rewrites the
// files when the record differs: a spec of the Features shape must read as
// it did before Shape existed.
func TestFeaturesSpecJSONHasNoShape(t *testing.T) {
	raw, err := json.Marshal(Spec{Files: 1, RowsPerFile: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "Shape") {
		t.Fatalf("a Features spec records its shape: %s", raw)
	}
}
