package text

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Dates and timestamps in every order, read against the time package's
// own reading of the same instants: random ones, then the edges.
func TestParseDatesAgainstTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	layouts := map[guess]string{
		formYMD4: "2006-1-2", formDMY4: "2/1/2006", formMDY4: "1.2.2006",
		formYMD2: "06-01-02", formDMY2: "02-01-06", formMDY2: "01/02/06",
	}
	for range 20000 {
		ts := time.Unix(rng.Int64N(400*365*86400)-200*365*86400, rng.Int64N(1e9)).UTC()
		ts = ts.Truncate(time.Microsecond)
		for form, layout := range layouts {
			d := ts.Format(layout)
			if form == formYMD2 || form == formDMY2 || form == formMDY2 {
				if y := ts.Year(); y < 1969 || y > 2068 {
					continue // two-digit years stand for these only
				}
			}
			want := int32(time.Date(ts.Year(), ts.Month(), ts.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400)
			if got, ok := parseDate([]byte(d), form); !ok || got != want {
				t.Fatalf("parseDate(%q, %b) = %d, %v; want %d", d, form, got, ok, want)
			}
			// With a time and a zone: 'T' and minutes-only forms after ISO
			// dates only; a month-first date takes a time of 12 hours and
			// AM or PM, without a zone, as DuckDB's formats have it.
			off := (rng.IntN(27*4) - 14*4) * 15 * 60
			zone := time.FixedZone("", off)
			local := ts.In(zone)
			v := local.Format(layout) + " " + local.Format("15:04:05.999999Z07:00")
			if form == formMDY4 || form == formMDY2 {
				v = ts.Format(layout) + " " + ts.Format("03:04:05.999999 PM")
				if _, ok := parseTimestamp([]byte(ts.Format(layout)+" "+ts.Format("15:04:05")), form, form, arrow.Microsecond); ok {
					t.Fatalf("%q read as a timestamp: DuckDB has no month-first format of 24 hours", ts.Format(layout)+" "+ts.Format("15:04:05"))
				}
			}
			got, ok := parseTimestamp([]byte(v), form, form, arrow.Microsecond)
			if !ok || got != ts.UnixMicro() {
				t.Fatalf("parseTimestamp(%q) = %d, %v; want %d (%s)", v, got, ok, ts.UnixMicro(), ts)
			}
		}
	}
	for _, c := range []struct {
		v    string
		unit arrow.TimeUnit
		want int64
		ok   bool
	}{
		{"9999-12-31 23:59:59.999999", arrow.Microsecond, 253402300799999999, true},
		{"0001-01-01 00:00:00", arrow.Microsecond, -62135596800000000, true},
		{"2262-04-11 23:47:16.854775807", arrow.Nanosecond, 9223372036854775807, true},
		{"2263-01-01 00:00:00", arrow.Nanosecond, 0, false}, // past int64 nanoseconds
		{"1677-09-21 00:12:43.145224192", arrow.Nanosecond, -9223372036854775808, true},
		{"1677-09-21 00:12:43.145224191", arrow.Nanosecond, 0, false},
		{"2000-01-01 00:30:00+01", arrow.Second, 946683000, true}, // the day before in UTC
		{"2000-01-01 10:00:00.123456789", arrow.Millisecond, 946720800123, true},
		{"2000-01-01 10:00+02", arrow.Second, 0, false},
		{"2000-01-01 24:00:00", arrow.Second, 0, false},
		{"2000-01-01 10:00:00+24", arrow.Second, 0, false},
		{"2000-13-01 10:00:00", arrow.Second, 0, false},
		{"2000-01-01 10:00:00 AM", arrow.Second, 0, false}, // AM/PM after month first only
		{"2000-01-01", arrow.Second, 946684800, true},      // a date alone is its midnight
	} {
		got, ok := parseTimestamp([]byte(c.v), formYMD4, formYMD4, c.unit)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseTimestamp(%q, %s) = %d, %v; want %d, %v", c.v, c.unit, got, ok, c.want, c.ok)
		}
	}
	for v, want := range map[string]string{
		"05:40": "05:40:00", "5:40:01.5": "05:40:01.5", "23:59:59.999999999": "23:59:59.999999",
		"24:00": "", "1:2": "", "10:60": "", "10:00:60": "", "10:00:00.": "", "10:00:00+02": "",
	} {
		got, ok := parseTime([]byte(v), arrow.Microsecond)
		s := ""
		if ok {
			s = time.UnixMicro(got).UTC().Format("15:04:05.999999")
		}
		if s != want {
			t.Errorf("parseTime(%q) = %q, want %q", v, s, want)
		}
	}
}
