package avro

import "testing"

// ReadBytes reads a whole file from its bytes as the driver does, for the
// fuzz target (see readFile).
func ReadBytes(t *testing.T, data []byte) error { return readFile(t, data) }
