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
