package main

import (
	"bytes"
	"testing"
)

func TestListsTheTestsThatReachShort(t *testing.T) {
	var out bytes.Buffer
	if err := run("testdata/mod", nil, &out); err != nil {
		t.Fatal(err)
	}
	want := "./a\t^(FuzzSampled|TestDirect|TestThroughClosure|TestThroughHelper|TestThroughMethod)$\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	if err := run("testdata/mod", []string{"a"}, &out); err != nil || out.Len() != 0 {
		t.Errorf("with a excluded: %q, %v", out.String(), err)
	}
	if err := run("testdata", nil, &out); err == nil {
		t.Error("a directory without go.mod was taken")
	}
}
