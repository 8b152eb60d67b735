package formats

import "context"

// waitedKey is the context key of WithWaited.
type waitedKey struct{}

// WithWaited returns ctx carrying waited, which a reader sets on the
// context of a Decode to say, each time it is called, whether the reader
// is waiting for that decode now: every batch before its rows has been
// handed on. A driver that can split a batch's work (its columns, say)
// then gives that decode more goroutines than its share of the cores,
// so that the rows everything waits for come sooner while other decodes
// run beside it.
func WithWaited(ctx context.Context, waited func() bool) context.Context {
	return context.WithValue(ctx, waitedKey{}, waited)
}

// Waited reports whether the reader that started the Decode given ctx is
// waiting for it now (see WithWaited); false where it did not say.
func Waited(ctx context.Context) bool {
	f, _ := ctx.Value(waitedKey{}).(func() bool)
	return f != nil && f()
}

// transientKey is the context key of WithTransient.
type transientKey struct{}

// WithTransient returns ctx saying that the reader copies the batches of a
// Decode into others and releases them at once (a shuffled window is
// permuted so), into buffers of the allocator it passed, which it
// recycles. A driver then builds every batch of that allocator's buffers
// rather than lend buffers of its own (see Transient).
func WithTransient(ctx context.Context) context.Context {
	return context.WithValue(ctx, transientKey{}, true)
}

// Transient reports whether the batches of the Decode given ctx are
// released as soon as they are copied (see WithTransient). A buffer a
// driver lends to a batch instead of copying out of it (a dictionary page
// whose entries are the batch's values in order) then saves no copy, and
// is one the garbage collector frees rather than one recycled.
func Transient(ctx context.Context) bool {
	t, _ := ctx.Value(transientKey{}).(bool)
	return t
}
