package group

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/file"
)

func sampleTopology() Topology {
	return Topology{Job: "orders", Tasks: 12, MaxParallelism: 128,
		Operators: []string{"source", "count", "sink"},
		Schemas:   []Schema{{Name: "count/n", Fingerprint: 0x1234}, {Name: "count/last", Fingerprint: 0xfeed}}}
}

func fileStore(t testing.TB) *file.Store {
	t.Helper()
	s, err := file.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTopology: the first process records its topology; the same one is
// accepted again (in any schema order); each kind of difference is
// refused naming the field and both values.
func TestTopology(t *testing.T) {
	ctx := context.Background()
	s := fileStore(t)
	if err := CheckTopology(ctx, s, sampleTopology()); err != nil {
		t.Fatal(err)
	}
	same := sampleTopology()
	same.Schemas[0], same.Schemas[1] = same.Schemas[1], same.Schemas[0]
	if err := CheckTopology(ctx, s, same); err != nil {
		t.Fatalf("the same topology: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*Topology)
		field  string
		want   []string
	}{
		{"tasks", func(t *Topology) { t.Tasks = 16 }, "tasks (partitions of the input)", []string{"16", "12"}},
		{"max parallelism", func(t *Topology) { t.MaxParallelism = 64 }, "max parallelism", []string{"64", "128"}},
		{"operator renamed", func(t *Topology) { t.Operators[1] = "total" }, "operator 2", []string{`"total"`, `"count"`}},
		{"operator added", func(t *Topology) { t.Operators = append(t.Operators, "audit") }, "operator 4", []string{`"audit"`, "none"}},
		{"schema changed", func(t *Topology) { t.Schemas[0].Fingerprint = 0x99 }, `schema "count/n"`, []string{"0000000000000099", "0000000000001234"}},
		{"schema added", func(t *Topology) { t.Schemas = append(t.Schemas, Schema{"x/y", 1}) }, `schema "x/y"`, []string{"absent"}},
		{"schema dropped", func(t *Topology) { t.Schemas = t.Schemas[:1] }, `schema "count/last"`, []string{"absent"}},
	} {
		top := sampleTopology()
		c.change(&top)
		err := CheckTopology(ctx, s, top)
		var te *TopologyError
		if !errors.As(err, &te) || !errors.Is(err, ErrTopologyMismatch) || te.Field != c.field {
			t.Errorf("%s: %v, want a *TopologyError on %s", c.name, err, c.field)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %s", c.name, err, w)
			}
		}
	}
}

// TestTopologyDamaged: a record whose bytes fail the store's checksum,
// and one that the store accepts but is no topology, are errors naming
// the object, never a topology accepted or recorded anew.
func TestTopologyDamaged(t *testing.T) {
	ctx := context.Background()
	s := fileStore(t)
	if err := CheckTopology(ctx, s, sampleTopology()); err != nil {
		t.Fatal(err)
	}
	path := s.Path(TopologyObject)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(topologyMagic)+2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err = CheckTopology(ctx, s, sampleTopology())
	var corrupt *blob.CorruptError
	if !errors.As(err, &corrupt) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), TopologyObject) {
		t.Errorf("a record failing its checksum: %v", err)
	}

	if err := s.Put(ctx, TopologyObject, []byte("ETO\x01garbage")); err != nil {
		t.Fatal(err)
	}
	err = CheckTopology(ctx, s, sampleTopology())
	var de *TopologyDecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), TopologyObject) {
		t.Errorf("a record that is no topology: %v", err)
	}
}

// TestTopologyConcurrent: of processes starting at once with different
// topologies, exactly one records its own and the others are refused.
func TestTopologyConcurrent(t *testing.T) {
	ctx := context.Background()
	s := fileStore(t)
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			top := sampleTopology()
			top.Tasks = int32(1 + i)
			errs <- CheckTopology(ctx, s, top)
		}()
	}
	ok := 0
	for range 8 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrTopologyMismatch):
			t.Error(err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of 8 different topologies accepted, want 1", ok)
	}
}

func TestTopologyInvalid(t *testing.T) {
	s := fileStore(t)
	for _, change := range []func(*Topology){
		func(t *Topology) { t.Job = "" },
		func(t *Topology) { t.Tasks = 0 },
		func(t *Topology) { t.MaxParallelism = -1 },
		func(t *Topology) { t.Operators = []string{""} },
		func(t *Topology) { t.Schemas = append(t.Schemas, t.Schemas[0]) },
	} {
		top := sampleTopology()
		change(&top)
		if err := CheckTopology(context.Background(), s, top); err == nil {
			t.Errorf("%+v accepted", top)
		}
	}
	if names, _ := s.List(context.Background(), ""); len(names) != 0 {
		t.Errorf("invalid topologies recorded %v", names)
	}
}

// FuzzDecodeTopology: the decoder of stored (outside) bytes never panics,
// and whatever it accepts encodes back to the same bytes.
func FuzzDecodeTopology(f *testing.F) {
	top := sampleTopology()
	f.Add(appendTopology(nil, &top))
	f.Add(appendTopology(nil, &Topology{Job: "j", Tasks: 1, MaxParallelism: 1}))
	f.Add([]byte(topologyMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeTopology(data)
		if err != nil {
			var de *TopologyDecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T %v, want a *TopologyDecodeError", err, err)
			}
			return
		}
		again := appendTopology(nil, &got)
		if string(again) != string(data) {
			t.Fatalf("re-encoding %+v gives other bytes", got)
		}
		back, err := decodeTopology(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("decoding the re-encoding of %+v: %+v, %v", got, back, err)
		}
	})
}
