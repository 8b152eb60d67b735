// Package storage is the old home of package
// github.com/sluicedata/sluice/storage, kept for one release so that programs
// written against it still build: every name here is the same type, value
// or function as the one of that name there.
//
// Deprecated: import github.com/sluicedata/sluice/storage instead.
package storage

import "github.com/sluicedata/sluice/storage"

// Type aliases: a value of one is a value of the other, so code that mixes
// the two paths during the move still compiles.
type (
	// Deprecated: use storage.Bucket.
	Bucket = storage.Bucket
	// Deprecated: use storage.Counting.
	Counting = storage.Counting
	// Deprecated: use storage.Driver.
	Driver = storage.Driver
	// Deprecated: use storage.Object.
	Object = storage.Object
	// Deprecated: use storage.Opener.
	Opener = storage.Opener
	// Deprecated: use storage.Options.
	Options = storage.Options
	// Deprecated: use storage.Reader.
	Reader = storage.Reader
	// Deprecated: use storage.Resolver.
	Resolver = storage.Resolver
	// Deprecated: use storage.RetryPolicy.
	RetryPolicy = storage.RetryPolicy
	// Deprecated: use storage.Source.
	Source = storage.Source
)

// The sentinels are the same values, so errors.Is matches either name.
var (
	// Deprecated: use storage.ErrNotFound.
	ErrNotFound = storage.ErrNotFound
	// Deprecated: use storage.ErrNoDataFiles.
	ErrNoDataFiles = storage.ErrNoDataFiles
	// Deprecated: use storage.ErrNoDriver.
	ErrNoDriver = storage.ErrNoDriver
	// Deprecated: use storage.ErrTransient.
	ErrTransient = storage.ErrTransient
)

var (
	// Deprecated: use storage.NewResolver.
	NewResolver = storage.NewResolver
	// Deprecated: use storage.NewCounting.
	NewCounting = storage.NewCounting
	// Deprecated: use storage.Register.
	Register = storage.Register
	// Deprecated: use storage.Retrying.
	Retrying = storage.Retrying
	// Deprecated: use storage.Transient.
	Transient = storage.Transient
)
