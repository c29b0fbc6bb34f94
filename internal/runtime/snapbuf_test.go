package runtime

import "testing"

// TestSnapshotBufsReused: an operator's next snapshot gets the buffer of
// one whose upload is done, emptied with its memory, and the operator
// keeps at most keepSnapshotBufs of them.
func TestSnapshotBufsReused(t *testing.T) {
	k := &Keyed{}
	a := k.snapshotBuf()
	*a = append(*a, make([]byte, 1000)...)
	b := k.snapshotBuf() // taken while a still uploads: another one
	if a == b {
		t.Fatal("a buffer in use was handed out again")
	}
	k.releaseSnapshotBuf(a)
	c := k.snapshotBuf()
	if c != a || len(*c) != 0 || cap(*c) < 1000 {
		t.Fatalf("after a's release got %p (len %d, cap %d), want a (%p) emptied with its memory", c, len(*c), cap(*c), a)
	}
	bufs := []*[]byte{c, b, new([]byte)}
	for _, x := range bufs {
		k.releaseSnapshotBuf(x)
	}
	if n := len(k.snapFree); n != keepSnapshotBufs {
		t.Fatalf("%d buffers released, %d kept, want %d", len(bufs), n, keepSnapshotBufs)
	}
}
