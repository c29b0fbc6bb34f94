package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob/file"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/serde"
	"github.com/eddyflow/eddy/state"
)

type valV1 struct {
	A int64 `proto:"1"`
}

type valV2 struct {
	A int64  `proto:"1"`
	B string `proto:"2"`
}

// writeCheckpoint stores a checkpoint of operator "op" with integer keys
// whose two parts were written by jobs with two versions of the value
// type (as a changelog checkpoint can carry an older run's part), with
// value, list and map states.
func writeCheckpoint(t *testing.T) (dir string, keys []int64) {
	t.Helper()
	ks, _ := serde.SchemaOf[int64]()
	keyBytes := func(k int64) []byte { b, _ := serde.MustFor[int64]().Append(nil, &k); return b }
	var parts [][]byte
	for sub := 0; sub < 2; sub++ {
		b := state.NewBackend(4, sub*2, sub*2+2, ks)
		b.SetDeterministic(true)
		var put func(k int64)
		if sub == 0 {
			v, _ := state.NewValue[valV1](b, "val")
			put = func(k int64) { v.Update(valV1{A: k * 10}) }
		} else {
			v, _ := state.NewValue[valV2](b, "val")
			put = func(k int64) { v.Update(valV2{A: k * 10, B: fmt.Sprint("b", k)}) }
		}
		l, _ := state.NewList[int64](b, "lst")
		m, _ := state.NewMap[string, int32](b, "m")
		for k := int64(-3); k <= 5; k++ {
			kb := keyBytes(k)
			kg := state.KeyGroupFor(kb, 4)
			if kg/2 != sub {
				continue
			}
			keys = append(keys, k)
			b.SetCurrentKey(kb, kg)
			put(k)
			l.Add(k)
			l.Add(k + 1)
			m.Put("x", int32(k))
		}
		snap, err := b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, snap)
	}
	dir = t.TempDir()
	store, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := checkpoint.NewStorage(store, 0)
	ctx := context.Background()
	op := checkpoint.OperatorState{Name: "op", MaxParallelism: 4, Parallelism: 2}
	var files []string
	for i, p := range parts {
		name := st.StateBlobName(1, "op", i)
		if err := store.Put(ctx, name, p); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
		op.Parts = append(op.Parts, checkpoint.StatePart{Subtask: uint32(i), KeyGroupStart: uint32(2 * i), KeyGroupEnd: uint32(2*i + 2),
			Blob: name, Size: int64(len(p))})
	}
	if err := st.Write(ctx, &checkpoint.Manifest{ID: 1, Job: "t", Operators: []checkpoint.OperatorState{op}, Files: files}); err != nil {
		t.Fatal(err)
	}
	return dir, keys
}

// TestDumpIntegerKeysAndEvolvedSchemas: integer keys decode and can be
// selected; each part's values decode with the schema that part stores;
// list and map states decode by element.
func TestDumpIntegerKeysAndEvolvedSchemas(t *testing.T) {
	dir, keys := writeCheckpoint(t)
	ctx := context.Background()
	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := FindCheckpoint(ctx, store, "1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = Dump(ctx, store, m, DumpOptions{Operator: "op"}, func(e Entry) error {
		got[fmt.Sprintf("%s/%v", e.State, e.Key)] = string(serde.AppendDynamicJSON(nil, e.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*len(keys) {
		t.Fatalf("%d entries for %d keys: %v", len(got), len(keys), got)
	}
	for _, k := range keys {
		kb, _ := serde.MustFor[int64]().Append(nil, &k)
		wantVal := fmt.Sprintf(`{"a":%d}`, k*10)
		if state.KeyGroupFor(kb, 4) >= 2 {
			wantVal = fmt.Sprintf(`{"a":%d,"b":"b%d"}`, k*10, k)
		}
		for name, want := range map[string]string{"val": wantVal, "lst": fmt.Sprintf("[%d,%d]", k, k+1), "m": fmt.Sprintf(`{"x":%d}`, k)} {
			if g := got[fmt.Sprintf("%s/%d", name, k)]; g != want {
				t.Errorf("%s of key %d = %s, want %s", name, k, g, want)
			}
		}
	}

	// One key, given as text.
	key := fmt.Sprint(keys[0])
	n := 0
	err = Dump(ctx, store, m, DumpOptions{Operator: "op", State: "lst", Key: &key}, func(e Entry) error {
		n++
		if e.Key != keys[0] {
			t.Errorf("key %v", e.Key)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("--key %s: %d entries, %v", key, n, err)
	}
	bad := "x1"
	err = Dump(ctx, store, m, DumpOptions{Operator: "op", Key: &bad}, func(Entry) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `--key "x1": does not parse as a key of type int64`) {
		t.Fatalf("bad key: %v", err)
	}
	err = Dump(ctx, store, m, DumpOptions{Operator: "op", State: "nope"}, func(Entry) error { return nil })
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), `"val", "lst", "m"`) {
		t.Fatalf("unknown state: %v", err)
	}
}
