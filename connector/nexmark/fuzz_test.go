package nexmark

import (
	"encoding/binary"
	"testing"

	"github.com/eddyflow/eddy/connector"
)

// FuzzOpenSplit: a position is outside bytes (it comes back from a
// checkpoint). Whatever it holds, OpenSplit returns an error or a reader
// that yields the split's own events from that index on, and whose
// Position reopens where it stands; it never panics.
func FuzzOpenSplit(f *testing.F) {
	f.Add(uint8(3), uint8(1), int64(1_000), binary.AppendUvarint(nil, 4))
	f.Add(uint8(3), uint8(2), int64(0), binary.AppendUvarint(nil, 1<<40+2))
	f.Add(uint8(1), uint8(0), int64(10), []byte{0x80})
	f.Add(uint8(8), uint8(9), int64(10), []byte(nil))
	f.Add(uint8(5), uint8(4), int64(7), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, splits, split uint8, events int64, pos []byte) {
		src, err := New(Splits(int(splits)), Events(events), Rate(1000))
		if err != nil {
			return
		}
		r, err := src.OpenSplit(ctx, int(split), pos)
		if err != nil {
			return
		}
		n := int64(src.Splits())
		start := int64(split)
		if pos != nil {
			v, _ := binary.Uvarint(pos)
			start = int64(v)
		}
		if start%n != int64(split) {
			t.Fatalf("opened split %d of %d at index %d", split, n, start)
		}
		var e Event
		for k := int64(0); k < 3; k++ {
			i := start + k*n
			st, err := r.Next(&e)
			if err != nil {
				t.Fatal(err)
			}
			if st == connector.End {
				if i < src.Len() {
					t.Fatalf("end at index %d of %d", i, src.Len())
				}
				break
			}
			if i >= src.Len() {
				t.Fatalf("event %d past the end %d", i, src.Len())
			}
			if e.Kind != KindOf(i) || e.DateTime() != src.EventTime(i) {
				t.Fatalf("index %d: kind %d at %d", i, e.Kind, e.DateTime())
			}
		}
		if _, err := src.OpenSplit(ctx, int(split), r.Position()); err != nil {
			t.Fatalf("reopen at own position %x: %v", r.Position(), err)
		}
	})
}
