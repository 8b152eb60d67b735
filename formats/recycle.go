package formats

// Recycler is a Buffer whose memory its driver reuses for later fetches
// once no decode will read it again: Recycle is called once, after the
// Fetched the buffer came in and every part of it were released (see
// Fetched.Release), and the buffer is not decoded after it. A driver's
// decode must not leave any of the buffer's bytes in the batches it
// builds: they are copied out, as they are when decoding anyway.
type Recycler interface {
	Buffer
	Recycle()
}

// Release says that fe will not be decoded again (a later Decode of it is
// refused): once the Fetched a Fetch returned and every part made of it
// are released, the driver may reuse their memory. A release is optional,
// the garbage collector takes what is never released, and releasing a
// Fetched twice is the same as once. A part is taken before its whole is
// released, and decoded before it is released itself.
func (fe *Fetched) Release() {
	if fe == nil || !fe.released.CompareAndSwap(false, true) || fe.holds == nil {
		return
	}
	if fe.holds.Add(-1) == 0 {
		fe.data.(Recycler).Recycle()
	}
}
