package text

import (
	"math"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zone names read alike on every machine

	"github.com/apache/arrow-go/v18/arrow"
)

// Dates, times and timestamps in the forms DuckDB's CSV sniffer detects.
//
// A date is three numbers split by one of '-', '/' or '.' (the same twice),
// read in one of six orders: month-day-year and day-month-year with a four-
// or two-digit year, year-month-day with either. Days and months may have
// one digit. A column takes the order every sampled value fits; where
// several fit (01-02-2000), the one DuckDB prefers: year first, then day
// first, then month first, a two-digit year before a four-digit one in each
// (DuckDB tries its candidates in the reverse order and keeps the last that
// fits). A two-digit year is 2000 to 2068 below 69, else 1969 to 1999, as
// POSIX's %y.
//
// A time of day is H:MM, H:MM:SS or H:MM:SS.fraction (hours 0 to 23). A
// timestamp is a date, a space and a time with seconds; after an ISO date
// also 'T' and a time without seconds; after the seconds an optional zone
// (Z, +HH, +HHMM or +HH:MM), or AM or PM after a month-first date. A
// timestamp with a zone is converted to UTC and read, as every timestamp
// is, as timestamp[us] without a zone. As DuckDB has one date format and
// one timestamp format a file, fileForms settles one order a file.

// The date orders and separators, as bits of a guess (values.go's gDate;
// the same shifted by tsShift for a timestamp's date, gTimestamp), the
// orders in DuckDB's order of candidates: where several fit every value,
// the highest bit wins.
const (
	formMDY4 guess = 1 << (iota + 4)
	formMDY2
	formDMY4
	formDMY2
	formYMD4
	formYMD2
	// The separator a date uses: a column's values must share one, as
	// DuckDB's format has one.
	sepDash
	sepSlash
	sepDot
	seps      = sepDash | sepSlash | sepDot
	orders    = formMDY4 | formMDY2 | formDMY4 | formDMY2 | formYMD4 | formYMD2
	formsDate = orders | seps
	tsShift   = 9
	formsTS   = formsDate << tsShift
)

// sepOf is the separator bit of the date at the start of v (dateFields
// has checked it is one of them).
func sepOf(v []byte) guess {
	for _, c := range v {
		switch c {
		case '-':
			return sepDash
		case '/':
			return sepSlash
		case '.':
			return sepDot
		}
	}
	return 0
}

// bestForm is the preferred date order of a guess's date bits (shifted
// down for a timestamp's), or 0 if none is left.
func bestForm(forms guess) guess {
	if forms&seps == 0 {
		return 0 // values with separators in common: none
	}
	for f := formYMD2; f >= formMDY4; f >>= 1 {
		if forms&f != 0 {
			return f
		}
	}
	return 0
}

// dateFields splits the date at the start of v: three numbers of 1 to 4
// digits split by the same '-', '/' or '.'. It returns the numbers, their
// digit counts and the bytes used.
func dateFields(v []byte) (n [3]int, digits [3]int, used int, ok bool) {
	var sep byte
	i := 0
	for k := range 3 {
		if k > 0 {
			if i >= len(v) || (v[i] != '-' && v[i] != '/' && v[i] != '.') || (k == 2 && v[i] != sep) {
				return n, digits, 0, false
			}
			sep = v[i]
			i++
		}
		start := i
		for i < len(v) && i-start < 5 && v[i] >= '0' && v[i] <= '9' {
			n[k] = n[k]*10 + int(v[i]-'0')
			i++
		}
		digits[k] = i - start
		if digits[k] == 0 || digits[k] > 4 {
			return n, digits, 0, false
		}
	}
	return n, digits, i, true
}

// dateForms is the date orders the date at the start of v fits, with the
// bytes used: 0 forms if it is not a date.
func dateForms(v []byte) (guess, int) {
	n, d, used, ok := dateFields(v)
	if !ok {
		return 0, 0
	}
	var forms guess
	for f := formMDY4; f <= formYMD2; f <<= 1 {
		if _, ok := dateIn(n, d, f); ok {
			forms |= f
		}
	}
	return forms, used
}

// dateIn reads fields n (of d digits) in order form, as days since 1970.
func dateIn(n, d [3]int, form guess) (int32, bool) {
	var y, m, day, yd int
	switch form {
	case formMDY4, formMDY2:
		m, day, y, yd = n[0], n[1], n[2], d[2]
		if d[0] > 2 || d[1] > 2 {
			return 0, false
		}
	case formDMY4, formDMY2:
		day, m, y, yd = n[0], n[1], n[2], d[2]
		if d[0] > 2 || d[1] > 2 {
			return 0, false
		}
	case formYMD4, formYMD2:
		y, m, day, yd = n[0], n[1], n[2], d[0]
		if d[1] > 2 || d[2] > 2 {
			return 0, false
		}
	default:
		return 0, false
	}
	four := form == formMDY4 || form == formDMY4 || form == formYMD4
	switch {
	case four && yd != 4, !four && yd != 2:
		return 0, false
	case !four && y < 69:
		y += 2000
	case !four:
		y += 1900
	}
	if m < 1 || m > 12 || day < 1 || day > daysIn(y, m) {
		return 0, false
	}
	return daysFromCivil(y, m, day), true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int32 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int32(era*146097 + doe - 719468)
}

// parseDate reads v, all of it, as a date in order form (formYMD4, ISO
// 8601, where a file's sample has not said).
func parseDate(v []byte, form guess) (int32, bool) {
	n, d, used, ok := dateFields(v)
	if !ok || used != len(v) {
		return 0, false
	}
	return dateIn(n, d, form)
}

// clock reads a time of day at the start of v, H:MM[:SS[.fraction]], as
// nanoseconds since midnight; secs says whether it has seconds.
func clock(v []byte) (ns int64, used int, secs, ok bool) {
	num := func(i, min, max int) (int, int, bool) {
		x, j := 0, i
		for j < len(v) && j-i < max && v[j] >= '0' && v[j] <= '9' {
			x = x*10 + int(v[j]-'0')
			j++
		}
		return x, j, j-i >= min && (j >= len(v) || v[j] < '0' || v[j] > '9')
	}
	h, i, ok := num(0, 1, 2)
	if !ok || h > 23 || i >= len(v) || v[i] != ':' {
		return 0, 0, false, false
	}
	m, i, ok := num(i+1, 2, 2)
	if !ok || m > 59 {
		return 0, 0, false, false
	}
	ns = int64(h*3600+m*60) * 1e9
	if i >= len(v) || v[i] != ':' {
		return ns, i, false, true
	}
	s, i, ok := num(i+1, 2, 2)
	if !ok || s > 59 {
		return 0, 0, false, false
	}
	ns += int64(s) * 1e9
	if i < len(v) && v[i] == '.' {
		j, scale := i+1, int64(1e8)
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			ns += int64(v[j]-'0') * scale // digits past nanoseconds are dropped
			scale /= 10
			j++
		}
		if j == i+1 {
			return 0, 0, false, false
		}
		i = j
	}
	return ns, i, true, true
}

// parseTime reads v, all of it, as a time of day in unit.
func parseTime(v []byte, unit arrow.TimeUnit) (int64, bool) {
	ns, used, _, ok := clock(v)
	if !ok || used != len(v) {
		return 0, false
	}
	return ns / unit.Multiplier().Nanoseconds(), true
}

// zone reads a zone at the start of v: Z, +HH, +HHMM or +HH:MM (or -), as
// seconds east of UTC.
func zone(v []byte) (int64, bool) {
	if len(v) == 1 && v[0] == 'Z' {
		return 0, true
	}
	if len(v) < 3 || (v[0] != '+' && v[0] != '-') {
		return 0, false
	}
	digits := func(b []byte) (int64, bool) {
		if len(b) != 2 || b[0] < '0' || b[0] > '9' || b[1] < '0' || b[1] > '9' {
			return 0, false
		}
		return int64(b[0]-'0')*10 + int64(b[1]-'0'), true
	}
	h, ok := digits(v[1:3])
	if !ok || h > 23 {
		return 0, false
	}
	var m int64
	switch rest := v[3:]; {
	case len(rest) == 0:
	case len(rest) == 3 && rest[0] == ':':
		m, ok = digits(rest[1:])
	default:
		m, ok = digits(rest)
	}
	if !ok || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if v[0] == '-' {
		off = -off
	}
	return off, true
}

// timeOfDay reads what follows a timestamp's date: 'T' or a space, a time,
// after the seconds AM or PM or a zone, as nanoseconds since midnight UTC
// (since midnight in loc, for a zone given by name). orders are the date
// orders that may precede it, as DuckDB's formats have them: a 'T', a time
// without seconds or a zone's name follow a year-first date only, AM and
// PM a month-first date only, and a month-first date has them (DuckDB has
// no month-first format of 24 hours: 2/18/2008 02:36:48 is text).
func timeOfDay(v []byte) (ns int64, allowed guess, loc *time.Location, ok bool) {
	if len(v) < 2 || (v[0] != 'T' && v[0] != ' ') {
		return 0, 0, nil, false
	}
	ns, used, secs, ok := clock(v[1:])
	if !ok {
		return 0, 0, nil, false
	}
	allowed = orders &^ (formMDY4 | formMDY2)
	if v[0] == 'T' || !secs {
		allowed = formYMD4
	}
	rest := v[1+used:]
	if len(rest) == 3 && rest[0] == ' ' && (rest[2] == 'M' || rest[2] == 'm') {
		pm := rest[1] == 'P' || rest[1] == 'p'
		if !pm && rest[1] != 'A' && rest[1] != 'a' {
			return 0, 0, nil, false
		}
		h := ns / 3600e9
		if !secs || h < 1 || h > 12 || v[0] != ' ' {
			return 0, 0, nil, false
		}
		if h == 12 {
			ns -= 12 * 3600e9
		}
		if pm {
			ns += 12 * 3600e9
		}
		return ns, formMDY4 | formMDY2, nil, true
	}
	var off int64
	if len(rest) > 0 {
		if !secs {
			return 0, 0, nil, false // as DuckDB: 10:00+02 is text
		}
		if rest[0] == ' ' {
			// A zone by its name, after one space: 2008-02-18 02:36:48 EST.
			if loc = zoneNamed(rest[1:]); loc == nil {
				return 0, 0, nil, false
			}
			return ns, formYMD4, loc, true
		}
		if off, ok = zone(rest); !ok {
			return 0, 0, nil, false
		}
	}
	return ns - off*1e9, allowed, nil, true
}

// parseTimestamp reads v, all of it, as a timestamp whose date is in order
// form, in unit; a date alone reads as its midnight where dateForm (the
// file's order for dates) reads it.
func parseTimestamp(v []byte, form, dateForm guess, unit arrow.TimeUnit) (int64, bool) {
	n, d, used, ok := dateFields(v)
	if !ok {
		return 0, false
	}
	var days int32
	var ns int64
	if used == len(v) {
		days, ok = dateIn(n, d, dateForm)
	} else {
		days, ok = dateIn(n, d, form)
		if ok {
			var allowed guess
			var loc *time.Location
			ns, allowed, loc, ok = timeOfDay(v[used:])
			ok = ok && form&allowed != 0
			if ok && loc != nil {
				days, ns = inZone(days, ns, loc)
			}
		}
	}
	if !ok {
		return 0, false
	}
	// Seconds and nanoseconds kept apart: nanoseconds since 1970 overflow
	// past 2262.
	secs := int64(days)*86400 + ns/1e9
	frac := ns % 1e9
	if frac < 0 {
		secs, frac = secs-1, frac+1e9
	}
	per := int64(1e9 / unit.Multiplier().Nanoseconds()) // units a second
	sub := frac / unit.Multiplier().Nanoseconds()
	// Past what the unit holds (nanoseconds: 1677 to 2262) is no value. A
	// second before 1970 is counted from its end, so that no step
	// overflows where the sum would not.
	if secs >= 0 {
		if secs > (math.MaxInt64-sub)/per {
			return 0, false
		}
		return secs*per + sub, true
	}
	if secs+1 < math.MinInt64/per {
		return 0, false
	}
	end := (secs + 1) * per
	if end < math.MinInt64+(per-sub) {
		return 0, false
	}
	return end - (per - sub), true
}

// isDate reports whether date bits g (a timestamp's shifted down) hold an
// order and a separator every value fits.
func isDate(g guess) bool { return g&orders != 0 && g&seps != 0 }

// fileForms settles the orders of a file's date and timestamp columns as
// DuckDB does, which has one date format and one timestamp format a file:
// the first date column (and the first timestamp column) takes its
// preferred order and its separator, and a later one that does not fit
// them is text; an ISO date column where the file's dates are in another
// form is read as timestamps, as DuckDB's timestamp parser reads it.
func fileForms(guesses []guess, seen []bool) {
	var date, ts guess
	fits := func(g, form guess) bool { return g&form&orders != 0 && g&form&seps != 0 }
	for i, g := range guesses {
		if !seen[i] {
			continue
		}
		switch g.csvType(true).ID() {
		case arrow.DATE32:
			if date == 0 {
				date = bestForm(g&gDate) | g&seps
			}
			if !fits(g, date) {
				g &^= gDate
				if guesses[i]&formYMD4 != 0 && guesses[i]&sepDash != 0 {
					g |= (formYMD4 | sepDash) << tsShift
				}
			}
			guesses[i] = g &^ (gDate &^ date)
		case arrow.TIMESTAMP:
			if ts == 0 {
				ts = bestForm((g&gTimestamp)>>tsShift) | (g>>tsShift)&seps
			}
			if !fits(g>>tsShift, ts) {
				g &^= gTimestamp
			}
			guesses[i] = g &^ (gTimestamp &^ (ts << tsShift))
		}
	}
}

// inZone is the UTC day and time of day of the wall time ns after
// midnight of day days in loc.
func inZone(days int32, ns int64, loc *time.Location) (int32, int64) {
	y, m, d := time.Unix(int64(days)*86400, 0).UTC().Date()
	secs := ns / 1e9
	t := time.Date(y, m, d, int(secs/3600), int(secs/60%60), int(secs%60), int(ns%1e9), loc).UTC()
	secs = t.Unix()
	day := secs / 86400
	if secs%86400 < 0 {
		day--
	}
	return int32(day), (secs-day*86400)*1e9 + int64(t.Nanosecond())
}

// legacyZones are the three-letter zone names DuckDB's ICU knows besides
// the IANA database's (Java's old ids), by the zone each stands for.
var legacyZones = map[string]string{
	"ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
	"ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
	"CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago", "CTT": "Asia/Shanghai",
	"EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris", "IET": "America/Indiana/Indianapolis",
	"IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia", "NET": "Asia/Yerevan",
	"NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico",
	"PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}

// zones holds the zones found, by their names in lower case: at most the
// database's zones, whatever a file holds (a name that is no zone is not
// kept, and is looked up again: it makes its column text at once).
var zones sync.Map

// zoneNamed is the zone a timestamp's suffix names, in any case, as
// DuckDB reads one (UTC, EST, Europe/Berlin, asia/tokyo, PST), or nil.
func zoneNamed(b []byte) *time.Location {
	if len(b) == 0 || len(b) > 40 {
		return nil
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '_' || c == '-' || c == '+') {
			return nil
		}
	}
	name := string(b)
	key := strings.ToLower(name)
	if v, ok := zones.Load(key); ok {
		return v.(*time.Location)
	}
	for _, try := range zoneSpellings(name) {
		if l, err := time.LoadLocation(try); err == nil && try != "Local" {
			zones.Store(key, l)
			return l
		}
	}
	return nil
}

// zoneSpellings are the ways a zone name given in any case may be spelled
// in the IANA database: as given, in capitals, and with each word
// capitalized and short parts in capitals (america/new_york is
// America/New_York, us/eastern US/Eastern, etc/gmt+3 Etc/GMT+3).
func zoneSpellings(name string) []string {
	upper := strings.ToUpper(name)
	out := []string{name, upper}
	if z, ok := legacyZones[upper]; ok {
		out = append([]string{z}, out...)
	}
	parts := strings.Split(strings.ToLower(name), "/")
	for i, p := range parts {
		if len(p) <= 3 || strings.ContainsAny(p, "+-0123456789") && len(p) <= 6 {
			parts[i] = strings.ToUpper(p)
			continue
		}
		word := []byte(p)
		for j := range word {
			if j == 0 || word[j-1] == '_' || word[j-1] == '-' {
				word[j] = byte(strings.ToUpper(string(word[j]))[0])
			}
		}
		parts[i] = string(word)
	}
	return append(out, strings.Join(parts, "/"))
}
