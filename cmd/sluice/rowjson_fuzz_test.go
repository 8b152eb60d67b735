package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/variant"
	"github.com/sluicedata/sluice/internal/testkit/corpus"
)

// FuzzAppendVariant prints arbitrary VARIANT bytes (metadata, value): it
// must return, without a panic, either an error or valid JSON. The seeds are
// the Parquet project's VARIANT test values.
func FuzzAppendVariant(f *testing.F) {
	shared, _ := corpus.Lookup(f) // seeds of its own below where it is missing
	dir := filepath.Join(shared, "parquet-testing", "variant")
	names, _ := filepath.Glob(filepath.Join(dir, "*.value"))
	for _, v := range names {
		value, err1 := os.ReadFile(v)
		meta, err2 := os.ReadFile(strings.TrimSuffix(v, ".value") + ".metadata")
		if err1 == nil && err2 == nil {
			f.Add(meta, value)
		}
	}
	f.Add([]byte{1, 0, 0}, []byte{0x03, 0x00, 0x00})             // an empty array
	f.Add([]byte{1, 0, 0}, []byte{0x2c, 0x34, 0x4e, 0x00, 0x00}) // a date
	f.Fuzz(func(t *testing.T, meta, value []byte) {
		v, err := safeVariant(meta, value)
		if err != nil {
			return // arrow-go refuses it before sluice sees it
		}
		out, err := appendVariant(nil, v)
		if err == nil && !json.Valid(out) {
			t.Fatalf("not JSON: %q", out)
		}
	})
}

// safeVariant is variant.New, whose own checks can panic on bad bytes
// (the driver reaches it under a recover).
func safeVariant(meta, value []byte) (v variant.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errPanicked
		}
	}()
	return variant.New(meta, value)
}

var errPanicked = &json.UnsupportedValueError{Str: "panicked"}

// The Parquet project's VARIANT test values print as its data_dictionary.json
// says, in the forms the mapping gives their
// types.
func TestAppendVariantCorpus(t *testing.T) {
	dir := filepath.Join(corpus.Dir(t), "parquet-testing", "variant")
	for name, want := range map[string]string{
		"array_empty":         `[]`,
		"primitive_date":      `"2025-04-16"`,
		"primitive_decimal4":  `"12.34"`,
		"primitive_timestamp": `"2025-04-16T16:34:56.78Z"`,
		"primitive_binary":    `"AxM33q2+78r+"`,
	} {
		meta, err1 := os.ReadFile(filepath.Join(dir, name+".metadata"))
		value, err2 := os.ReadFile(filepath.Join(dir, name+".value"))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v, %v", name, err1, err2)
		}
		v, err := variant.New(meta, value)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := appendVariant(nil, v)
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", name, got, err, want)
		}
	}
}
