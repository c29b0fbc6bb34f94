package state_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/eddyflow/eddy/state"
)

// BenchmarkValueCount is the state side of the keyed count: Get then Update
// of a Value[int64] per record, the keys of one subtask of parallelism 2 seen
// in turn. One op is one record. With new=true every record is of a new key
// (a fresh backend after each pass over the keys, outside the timing).
// The keys are strings of 14 bytes, or int64s as the runtime serializes
// them (int=true: a tag and a varint, 4 bytes here).
func BenchmarkValueCount(b *testing.B) {
	start, end := state.KeyGroupRange(128, 2, 0)
	for _, keys := range []int{10_000, 1_000_000} {
		for _, ints := range []bool{false, true} {
			var names [][]byte
			var groups []int
			for i := 0; len(names) < keys/2; i++ {
				k := fmt.Appendf(nil, "driver-%07d", i)
				if ints {
					k = binary.AppendUvarint([]byte{0x08}, uint64(1000+i))
				}
				if kg := state.KeyGroupFor(k, 128); kg >= start && kg < end {
					names, groups = append(names, k), append(groups, kg)
				}
			}
			for _, fresh := range []bool{false, true} {
				b.Run(fmt.Sprintf("keys=%d/int=%v/new=%v", keys, ints, fresh), func(b *testing.B) {
					var be *state.Backend
					var v *state.Value[int64]
					reset := func() {
						be = state.NewBackend(128, start, end, keySchema(b))
						v, _ = state.NewValue[int64](be, "count")
					}
					reset()
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						if i == len(names) {
							i = 0
							if fresh {
								b.StopTimer()
								reset()
								b.StartTimer()
							}
						}
						be.SetCurrentKey(names[i], groups[i])
						n, _ := v.Get()
						v.Update(n + 1)
					}
				})
			}
		}
	}
}
