package eddy

import (
	"testing"

	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

// TestMaterializationSteps: a step takes about stepBytes of key groups by
// their last sizes, at least one, and counts unknown groups as
// stepBytes/step.
func TestMaterializationSteps(t *testing.T) {
	ks, _ := serde.SchemaOf[int64]()
	b := state.NewBackend(128, 0, 16, ks)
	cl := &changelogState{cfg: &changelogConfig{step: 4, stepBytes: 1000}}
	if got := cl.stepEnd(b, 16); got != 4 {
		t.Fatalf("unknown sizes: step ends at %d, want 4", got)
	}
	v, _ := state.NewValue[string](b, "v")
	big := string(make([]byte, 600))
	for kg := range 16 {
		b.SetCurrentKey([]byte{byte(kg)}, kg)
		if kg < 8 {
			v.Update(big) // about 600 bytes: one group per step
		} else {
			v.Update("x") // tiny: the rest fits one step
		}
	}
	if _, err := b.Snapshot(); err != nil {
		t.Fatal(err)
	}
	cl.next = 0
	if got := cl.stepEnd(b, 16); got != 1 {
		t.Fatalf("large groups: step ends at %d, want 1", got)
	}
	cl.next = 8
	if got := cl.stepEnd(b, 16); got != 16 {
		t.Fatalf("small groups: step ends at %d, want 16", got)
	}
}
