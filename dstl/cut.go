package dstl

// Cut ends the current batch at a checkpoint barrier and returns the
// sequence number of the writer's last change. Changes appended after Cut
// go to a later batch, so the last-change-per-key deduplication inside a
// batch never replaces a change up to the barrier with one after it. Persist
// may then run in the background and its Handle be trimmed to Upto = the
// returned number.
func (w *Writer) Cut() uint64 {
	w.mu.Lock()
	upto := w.seq
	unsealed := len(w.cur.entries) > 0
	w.mu.Unlock()
	if unsealed {
		upto = w.log.seal(w)
	}
	return upto
}
