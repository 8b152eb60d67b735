package metrics

import (
	"errors"
	"expvar"
	"fmt"
)

// ErrNameTaken is returned by [Pipeline.PublishExpvar] when an expvar of that name exists.
var ErrNameTaken = errors.New("metrics: expvar name already published")

// PublishExpvar publishes the Pipeline as an expvar under name, so /debug/vars shows a JSON
// [Snapshot] of it, taken when the page is read. It returns an error wrapping [ErrNameTaken] if
// the name is in use, where [expvar.Publish] would panic.
//
// expvar has no way to unpublish, so a published Pipeline stays reachable, and its name taken,
// for the life of the process: publish one per process-long stream, not one per epoch.
func (p *Pipeline) PublishExpvar(name string) error {
	// The check avoids the panic, and the log line expvar writes before it, in the usual case;
	// publish still recovers for a rival that takes the name between the check and Publish.
	if expvar.Get(name) != nil || !publish(name, expvar.Func(func() any { return p.Snapshot() })) {
		return fmt.Errorf("%w: %q", ErrNameTaken, name)
	}
	return nil
}

// publish calls expvar.Publish and reports whether it succeeded instead of panicking.
func publish(name string, v expvar.Var) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	expvar.Publish(name, v)
	return true
}
