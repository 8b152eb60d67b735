package iceberg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
)

// Delete manifests as older engines wrote them carry in their Avro header
// the schema and the codec, but no "content" or "format-version" key.
// iceberg-go (v0.7.0) trusts the manifest's own header, reads such a
// manifest as a v1 data manifest and refuses it ("manifest file's
// 'content' metadata indicates "data", but entry from manifest list
// indicates "deletes""); the Java reference implementation takes the
// content from the manifest list. Until iceberg-go does too, the file
// system iceberg-go plans with hands it these manifests with the keys the
// list implies added to the header: content "deletes" and the list's
// format version. Every byte after the header (the sync marker and the
// blocks) is the writer's. Data manifests are left alone: without the keys
// iceberg-go reads them as data, which they are.

// plannerIO is fio for iceberg-go's scan planning of the snapshot: it reads
// the manifest list once (the scan reads it from memory) and notes the
// delete manifests it lists, whose headers Open completes.
func (t *Table) plannerIO(fio *fileIO) (*fileIO, error) {
	p := *fio
	var list []ice.ManifestFile
	var err error
	if ml := t.snap.ManifestList; ml != "" {
		var b []byte
		if b, err = fio.ReadFile(ml); err == nil {
			list, err = ice.ReadManifestList(bytes.NewReader(b))
			p.memo = map[string][]byte{ml: b}
		}
	} else {
		list, err = t.snap.Manifests(fio)
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s, %s: manifest list: %w", t.metaLoc, t.Version(), err)
	}
	p.deletes = map[string]int{}
	for _, m := range list {
		if m.ManifestContent() == ice.ManifestContentDeletes {
			p.deletes[m.FilePath()] = m.Version()
		}
	}
	return &p, nil
}

// openDeleteManifest reads a delete manifest the list names, with its
// header completed where the writer left the keys out.
func (f *fileIO) openDeleteManifest(name string, version int) (iceio.File, error) {
	b, err := f.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if done, err := completeManifestHeader(b, version); err == nil {
		b = done
	} // else: not a header this reads; iceberg-go's reader says what is wrong
	return &memFile{Reader: bytes.NewReader(b), name: name}, nil
}

var errHeader = errors.New("not an Avro object container header")

// completeManifestHeader returns the delete manifest b (an Avro object
// container file) with "content" set to "deletes" and, where missing,
// "format-version" to version in its header metadata. A header that has a
// "content" key is returned as it is: a content that contradicts the list
// stays an error of iceberg-go's.
func completeManifestHeader(b []byte, version int) ([]byte, error) {
	keys, vals, rest, err := readHeader(b)
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, k := range keys {
		has[k] = true
	}
	if has["content"] {
		return b, nil
	}
	keys, vals = append(keys, "content"), append(vals, []byte("deletes"))
	if !has["format-version"] {
		keys, vals = append(keys, "format-version"), append(vals, []byte(strconv.Itoa(version)))
	}
	out := make([]byte, 0, len(b)+64)
	out = append(out, avroMagic...)
	out = binary.AppendVarint(out, int64(len(keys)))
	for i, k := range keys {
		out = binary.AppendVarint(out, int64(len(k)))
		out = append(out, k...)
		out = binary.AppendVarint(out, int64(len(vals[i])))
		out = append(out, vals[i]...)
	}
	out = binary.AppendVarint(out, 0)
	return append(out, rest...), nil
}

var avroMagic = []byte("Obj\x01")

// readHeader splits an Avro object container file into its header
// metadata, in the writer's order, and what follows it (the sync marker
// and the blocks). The metadata is an Avro map of bytes: blocks of a
// zig-zag count (negative: followed by the block's size in bytes) and that
// many key and value pairs, ended by a count of zero.
func readHeader(b []byte) (keys []string, vals [][]byte, rest []byte, err error) {
	if !bytes.HasPrefix(b, avroMagic) {
		return nil, nil, nil, errHeader
	}
	pos := len(avroMagic)
	long := func() (int64, bool) {
		v, n := binary.Varint(b[pos:])
		if n <= 0 {
			return 0, false
		}
		pos += n
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		n, ok := long()
		if !ok || n < 0 || n > int64(len(b)-pos) {
			return nil, false
		}
		v := b[pos : pos+int(n)]
		pos += int(n)
		return v, true
	}
	for {
		count, ok := long()
		if !ok {
			return nil, nil, nil, errHeader
		}
		if count == 0 {
			break
		}
		if count < 0 {
			if _, ok := long(); !ok { // the block's size in bytes
				return nil, nil, nil, errHeader
			}
			count = -count
		}
		if count > int64(len(b)-pos)/2 { // each pair takes two bytes at least
			return nil, nil, nil, errHeader
		}
		for range count {
			k, ok1 := bytesOf()
			v, ok2 := bytesOf()
			if !ok1 || !ok2 {
				return nil, nil, nil, errHeader
			}
			keys, vals = append(keys, string(k)), append(vals, v)
		}
	}
	if len(b)-pos < 16 { // the sync marker
		return nil, nil, nil, errHeader
	}
	return keys, vals, b[pos:], nil
}

// memFile is a file of the table read into memory.
type memFile struct {
	*bytes.Reader
	name string
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f}, nil }
func (f *memFile) Close() error               { return nil }

type memInfo struct{ f *memFile }

func (fi memInfo) Name() string       { return fi.f.name }
func (fi memInfo) Size() int64        { return fi.f.Size() }
func (fi memInfo) Mode() fs.FileMode  { return 0o444 }
func (fi memInfo) ModTime() time.Time { return time.Time{} }
func (fi memInfo) IsDir() bool        { return false }
func (fi memInfo) Sys() any           { return nil }
