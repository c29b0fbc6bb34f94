package eddy

// WindowIndexOff makes window operators built until the returned function
// is called keep a timer per window, as before the index of open windows,
// so that tests can write checkpoints as older binaries did.
func WindowIndexOff() (on func()) {
	noWindowIndex = true
	return func() { noWindowIndex = false }
}
