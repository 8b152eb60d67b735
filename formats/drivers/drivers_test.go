package drivers_test

import (
	"strings"
	"testing"

	"github.com/sluicedata/sluice/formats/drivers"
	"github.com/sluicedata/sluice/formats/text"
)

// Every name listed has a driver of that name, in any case, and All tries
// every one of them, Parquet first (the driver of a file no name matches).
func TestNamesHaveDrivers(t *testing.T) {
	all := drivers.All(text.Options{})
	if len(all) != len(drivers.Names) {
		t.Fatalf("All has %d drivers for %d names", len(all), len(drivers.Names))
	}
	if all[0].Name() != drivers.Default().Name() || drivers.Default().Name() != "parquet" {
		t.Errorf("the first of All is %s, the default %s: want parquet for both", all[0].Name(), drivers.Default().Name())
	}
	for i, name := range drivers.Names {
		for _, asked := range []string{name, strings.ToUpper(name)} {
			d := drivers.Named(asked)
			if d == nil || d.Name() != name {
				t.Errorf("Named(%q) = %v, want the %s driver", asked, d, name)
			}
		}
		if all[i].Name() != name {
			t.Errorf("All[%d] is %s, Names[%d] %s", i, all[i].Name(), i, name)
		}
	}
	if d := drivers.Named("xlsx"); d != nil {
		t.Errorf("Named(xlsx) = %s, want none", d.Name())
	}
}
