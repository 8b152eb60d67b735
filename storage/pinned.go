package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrChanged is wrapped when an object is not the version that was planned:
// rewritten, replaced or touched since it was listed. Reads never mix the
// bytes of two versions: a read of another version fails instead. A
// ChangedError says how the object differs.
var ErrChanged = errors.New("object changed since it was planned")

// ChangedError is the error of a read that found an object other than the
// version planned. It wraps ErrChanged; the Reader that made the read names
// the object's URL around it.
type ChangedError struct {
	// Planned is the object as it was listed, and reads are pinned to.
	Planned Object
	// Found is the object as the store describes it now; its Key is ""
	// where the store could not say (deleted since).
	Found Object
	// what is the store's name for a version ("ETag", "generation").
	what string
	// unknown is why Found is not known.
	unknown error
}

func (e *ChangedError) Unwrap() error { return ErrChanged }

func (e *ChangedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrChanged.Error())
	if e.Found.Key == "" {
		fmt.Fprintf(&b, ": %s planned; it cannot be described now", describeVersion(e.Planned, e.what))
		if e.unknown != nil {
			fmt.Fprintf(&b, ": %v", e.unknown)
		}
		return b.String()
	}
	p, f := e.Planned, e.Found
	var diffs []string
	if p.Size != f.Size {
		diffs = append(diffs, fmt.Sprintf("size %d planned, %d found", p.Size, f.Size))
	}
	versioned := !sameVersion(f.Version, p.Version)
	if !versioned && !p.ModTime.IsZero() && !f.ModTime.IsZero() && !p.ModTime.Equal(f.ModTime) {
		// Only where the versions do not tell: stores give times at
		// another precision in a listing than in an answer.
		diffs = append(diffs, fmt.Sprintf("modified %s planned, %s found", stamp(p.ModTime), stamp(f.ModTime)))
	}
	if versioned {
		diffs = append(diffs, fmt.Sprintf("%s %s planned, %s found", e.what, p.Version, f.Version))
	}
	if len(diffs) == 0 {
		// The store refused the planned version (a 412) and then described
		// one that looks the same: rewritten again in between.
		diffs = append(diffs, describeVersion(p, e.what)+" planned, refused by the store")
	}
	b.WriteString(": ")
	b.WriteString(strings.Join(diffs, "; "))
	return b.String()
}

func describeVersion(o Object, what string) string {
	s := fmt.Sprintf("size %d", o.Size)
	if !o.ModTime.IsZero() {
		s += ", modified " + stamp(o.ModTime)
	}
	if o.Version != "" {
		s += ", " + what + " " + o.Version
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// sameVersion reports whether a version found is the one planned; "" on
// either side is no version to compare. ETags are compared without the
// quotes some listings drop.
func sameVersion(found, planned string) bool {
	if found == "" || planned == "" {
		return true
	}
	return strings.Trim(found, `"`) == strings.Trim(planned, `"`)
}

// version is the version the backend names in what as reaches (a listed
// object, attributes or a reader); "" where it names none.
func (b *blobBucket) version(as func(any) bool) string {
	if b.scheme == "file" {
		var fi os.FileInfo
		if !as(&fi) {
			return ""
		}
		return fileID(fi)
	}
	if b.drv.Version == nil {
		return ""
	}
	return b.drv.Version(as)
}

func (b *blobBucket) versionName() string {
	if b.scheme == "file" {
		return "inode"
	}
	return b.drv.VersionName
}

// readPin is what one range read sets up to read the planned version only.
type readPin struct {
	ctx  context.Context
	opts *blob.ReaderOptions
	obj  Object
	// file is the local file the read opened, checked again after it.
	file *os.File
	// changed is set where the local file opened is not the one planned.
	changed error
}

// pin readies a read of obj. An object store is asked for the planned
// version by a condition on the request (Driver.PrepareRead); a local file,
// which takes no condition, is checked once opened and again after the
// read, on the open file itself: size, modification time and inode.
func (b *blobBucket) pin(ctx context.Context, obj Object) *readPin {
	p := &readPin{ctx: ctx, obj: obj}
	switch {
	case b.scheme == "file":
		p.opts = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			if as(&p.file) {
				p.changed = checkFile(p.file, obj)
			}
			return p.changed
		}}
	case b.drv.PrepareRead != nil:
		var before func(func(any) bool) error
		p.ctx, before = b.drv.PrepareRead(ctx, obj.Version)
		p.opts = &blob.ReaderOptions{BeforeRead: before}
	}
	return p
}

// after checks, once the bytes are read, that a local file was not
// rewritten while they were: a rewrite in place changes its size or
// modification time. (A file replaced by a rename is another inode; the
// open one is still the planned one.)
func (p *readPin) after() error {
	if p.file == nil {
		return nil
	}
	return checkFile(p.file, p.obj)
}

// checkFile returns a ChangedError if the open file f is not want: another
// size, modification time (where want has one) or inode (where want has
// one).
func checkFile(f *os.File, want Object) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	found := Object{Key: want.Key, Size: fi.Size(), ModTime: fi.ModTime(), Version: fileID(fi)}
	if found.Size != want.Size || (!want.ModTime.IsZero() && !found.ModTime.Equal(want.ModTime)) || !sameVersion(found.Version, want.Version) {
		return &ChangedError{Planned: want, Found: found, what: "inode"}
	}
	return nil
}

// preconditionFailed reports whether err is a store's refusal of a read's
// condition: the object is no longer the version asked for.
func preconditionFailed(err error) bool {
	return gcerrors.Code(err) == gcerrors.FailedPrecondition || httpStatus(err) == http.StatusPreconditionFailed
}

// changedSince is the error of a read of obj that the store refused, its
// object being another version now: it says which.
func (b *blobBucket) changedSince(ctx context.Context, obj Object) error {
	found, err := b.Stat(ctx, obj.Key)
	if err != nil {
		return &ChangedError{Planned: obj, what: b.versionName(), unknown: err}
	}
	return &ChangedError{Planned: obj, Found: found, what: b.versionName()}
}

// followLink describes a listed local file that is a symbolic link by its
// target, as reads see it: a listing describes the link itself.
func followLink(o *Object, as func(any) bool) {
	var fi os.FileInfo
	if !as(&fi) || fi.Mode()&os.ModeSymlink == 0 {
		return
	}
	st, err := os.Stat(filepath.FromSlash("/" + o.Key))
	if err != nil || st.IsDir() {
		return // a broken link fails when read, naming itself
	}
	o.Size, o.ModTime, o.Version = st.Size(), st.ModTime(), fileID(st)
}
