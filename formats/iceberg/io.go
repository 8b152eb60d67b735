package iceberg

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/sluicedata/sluice/storage"
)

// locator turns the locations a table's metadata holds into URLs sluice's
// storage opens: the rewrite prefixes first (longest first), then the
// Hadoop spellings of schemes storage knows by other names.
type locator struct {
	from, to []string // rewrite prefixes, longest from first
}

func newLocator(rewrite map[string]string) locator {
	var l locator
	keys := make([]string, 0, len(rewrite))
	for k := range rewrite {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		l.from = append(l.from, k)
		l.to = append(l.to, rewrite[k])
	}
	return l
}

// url is where location lies for storage.
func (l locator) url(location string) string {
	for i, p := range l.from {
		if strings.HasPrefix(location, p) {
			location = l.to[i] + location[len(p):]
			break
		}
	}
	switch {
	case strings.HasPrefix(location, "s3a://"), strings.HasPrefix(location, "s3n://"):
		location = "s3://" + location[len("s3a://"):]
	case strings.HasPrefix(location, "file:/") && !strings.HasPrefix(location, "file://"):
		location = "file://" + location[len("file:"):] // Hadoop's file:/path
	}
	if i := strings.Index(location, "://"); i > 0 {
		// Locations are paths, not URLs: a file named with "%3A" (Hive's
		// escaped partition values) is named so on disk, and storage
		// decodes URLs.
		location = location[:i+3] + uriPath.Replace(location[i+3:])
	}
	return location
}

var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// fileIO is iceberg-go's file system over sluice's storage, so that
// manifests, delete files and deletion vectors are read with the same
// buckets, retries and rewrites as the data files.
type fileIO struct {
	ctx context.Context
	res *storage.Resolver
	loc locator
	// For scan planning (plannerIO): files already read, by location, and
	// the delete manifests the manifest list names, with the list's format
	// version. Read-only once planning starts.
	memo    map[string][]byte
	deletes map[string]int
}

var _ iceio.ReadFileIO = (*fileIO)(nil)

func (f *fileIO) open(name string) (*ioFile, error) {
	url := f.loc.url(name)
	srcs, err := f.res.Resolve(f.ctx, url, nil)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if len(srcs) != 1 || strings.HasSuffix(url, "/") {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%s names %d objects, not one file: %w", url, len(srcs), fs.ErrNotExist)}
	}
	return &ioFile{name: name, src: srcs[0], r: srcs[0].ReaderAt(f.ctx)}, nil
}

// Open opens a file of the table for reading.
func (f *fileIO) Open(name string) (iceio.File, error) {
	if b, ok := f.memo[name]; ok {
		return &memFile{Reader: bytes.NewReader(b), name: name}, nil
	}
	if v, ok := f.deletes[name]; ok {
		return f.openDeleteManifest(name, v)
	}
	return f.open(name)
}

// ReadFile reads a whole file (metadata JSON, a manifest).
func (f *fileIO) ReadFile(name string) ([]byte, error) {
	if b, ok := f.memo[name]; ok {
		return b, nil
	}
	file, err := f.open(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, file.src.Object.Size)
	if _, err := file.r.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return buf, nil
}

// Remove is refused: sluice only reads tables.
func (f *fileIO) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrPermission}
}

type ioFile struct {
	name string
	src  storage.Source
	r    *storage.Reader
}

func (f *ioFile) Stat() (fs.FileInfo, error)                { return fileInfo{f}, nil }
func (f *ioFile) Read(p []byte) (int, error)                { return f.r.Read(p) }
func (f *ioFile) ReadAt(p []byte, off int64) (int, error)   { return f.r.ReadAt(p, off) }
func (f *ioFile) Seek(off int64, whence int) (int64, error) { return f.r.Seek(off, whence) }
func (f *ioFile) Close() error                              { return nil }

type fileInfo struct{ f *ioFile }

func (fi fileInfo) Name() string       { return fi.f.name }
func (fi fileInfo) Size() int64        { return fi.f.src.Object.Size }
func (fi fileInfo) Mode() fs.FileMode  { return 0o444 }
func (fi fileInfo) ModTime() time.Time { return fi.f.src.Object.ModTime }
func (fi fileInfo) IsDir() bool        { return false }
func (fi fileInfo) Sys() any           { return nil }
