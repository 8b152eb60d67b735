package filter

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"label = 3 AND x > 0.5", `(("label" = 3) AND ("x" > 0.5))`},
		{"name IN ('a','b')", `("name" IN ('a', 'b'))`},
		{"NOT (y IS NULL)", `(NOT ("y" IS NULL))`},
		{"y is not null", `("y" IS NOT NULL)`},
		{"ts >= '2024-01-01'", `("ts" >= '2024-01-01')`},
		{"a BETWEEN 1 AND 2 AND b", `(("a" BETWEEN 1 AND 2) AND "b")`},
		{"a NOT BETWEEN -1.5 AND 2e3", `("a" NOT BETWEEN -1.5 AND 2000.0)`},
		{"a <> 1 OR b != 2", `(("a" <> 1) OR ("b" <> 2))`},
		// AND binds tighter than OR, NOT tighter than AND.
		{"a = 1 OR b = 2 AND NOT c", `(("a" = 1) OR (("b" = 2) AND (NOT "c")))`},
		{"(a = 1 OR b = 2) AND c", `((("a" = 1) OR ("b" = 2)) AND "c")`},
		{`"my col" = 'it''s' AND "q""uote" = TRUE`, `(("my col" = 'it''s') AND ("q""uote" = TRUE))`},
		{"d < DATE '2024-02-29' or t >= timestamp '2024-01-01 10:00:00Z'", `(("d" < DATE '2024-02-29') OR ("t" >= TIMESTAMP '2024-01-01 10:00:00Z'))`},
		{"3 < x", `(3 < "x")`},
		{"x not in (1, 2.0)", `("x" NOT IN (1, 2.0))`},
		{"s.t = .5", `("s.t" = 0.5)`},
		{"big = 99999999999999999999", `("big" = 1e+20)`},
	} {
		f, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := f.String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %s, want %s", tc.in, got, tc.want)
		}
		again, err := Parse(f.String())
		if err != nil || again.String() != f.String() {
			t.Errorf("canonical form %s does not parse to itself: %v %v", f, again, err)
		}
	}
}

func TestParseColumns(t *testing.T) {
	f, err := Parse(`b = 1 AND (a IS NULL OR "b" > 2) AND c IN (1)`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Columns(), ","); got != "b,a,c" {
		t.Errorf("Columns = %s, want b,a,c", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		pos      int
		expected string
	}{
		{"", 0, "an expression"},
		{"a =", 3, "a column, a literal or ("},
		{"a = 1 AND", 9, "a column, a literal or ("},
		{"a = 1 b = 2", 6, "AND, OR or the end"},
		{"(a = 1", 6, ") or an operator"},
		{"a IN 1", 5, "( after IN"},
		{"a IN (1 2)", 8, ", or )"},
		{"a IN (b)", 6, "a column, a literal or ("},
		{"a IS 1", 5, "NULL or NOT NULL"},
		{"a BETWEEN 1 OR 2", 12, "AND between the bounds"},
		{"a NOT = 1", 6, "IN or BETWEEN after NOT"},
		{"a = 'open", 4, "closing '"},
		{`"open = 1`, 0, "closing \""},
		{"a ! 1", 2, `"!="`},
		{"a = 1 # 2", 6, "a column, a literal"},
		{"a = -x", 4, "a number after the sign"},
		{"a = DATE 5", 9, "a quoted value after DATE"},
		{"a = DATE '2024-13-01'", 9, "YYYY-MM-DD"},
		{"a = 1e999", 4, "float64's range"},
		{`"" = 1`, 0, "non-empty column name"},
	} {
		_, err := Parse(tc.in)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want a syntax error", tc.in, err)
			continue
		}
		if se.Pos != tc.pos || !strings.Contains(se.Expected, tc.expected) {
			t.Errorf("Parse(%q): %v; want offset %d expecting %q", tc.in, err, tc.pos, tc.expected)
		}
	}
}

func TestParseDepth(t *testing.T) {
	deep := strings.Repeat("(", 10000) + "a" + strings.Repeat(")", 10000)
	if _, err := Parse(deep); !errors.Is(err, ErrSyntax) {
		t.Errorf("10000 parentheses: %v, want a syntax error", err)
	}
	nots := strings.Repeat("NOT ", 10000) + "a"
	if _, err := Parse(nots); !errors.Is(err, ErrSyntax) {
		t.Errorf("10000 NOTs: %v, want a syntax error", err)
	}
	ok := strings.Repeat("(", 50) + "a = 1" + strings.Repeat(")", 50)
	if _, err := Parse(ok); err != nil {
		t.Errorf("50 parentheses: %v", err)
	}
}

// FuzzParse: no input panics or hangs, and what parses prints a canonical
// form that parses back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"label = 3 AND x > 0.5", "name IN ('a','b')", "NOT (y IS NULL)", "ts >= '2024-01-01'",
		"a BETWEEN 1 AND 2", "a <> 1 OR b != 2", `"q""x" = 'it''s'`, "x = -1.5e-3", "d = DATE '2024-01-01'",
		"t < TIMESTAMP '2024-01-01T00:00:00.5+02:00'", "((a))", "NOT NOT a", "a IS NOT NULL", "a NOT IN (1)",
		"", "(", "'", `"`, "a = ", "1 = 1", "a IN ()", "\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(s) {
				t.Fatalf("Parse(%q): %v is not a positioned syntax error", s, err)
			}
			return
		}
		again, err := Parse(flt.String())
		if err != nil {
			t.Fatalf("canonical %s of %q does not parse: %v", flt, s, err)
		}
		if again.String() != flt.String() {
			t.Fatalf("canonical form unstable: %s then %s", flt, again)
		}
	})
}
