package dstl

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/s3/s3test"
)

// TestStreamOnS3 streams checkpoint intervals of 20 MB into multipart
// uploads on a real S3 server (versitygw, which enforces the 5 MiB least
// part size), through blob.Count: every interval is one object, built of
// parts that went up before its barrier, and Read replays all of them.
func TestStreamOnS3(t *testing.T) {
	srv := s3test.Versitygw(t)
	srv.CreateBucket(t, "dstl")
	var reqs blob.Counter
	store := blob.Count(srv.Open(t, "dstl", "log"), &reqs)
	l := openLog(t, store, Options{FlushBytes: 6 << 20})
	ws := []*Writer{l.Writer("a"), l.Writer("b")}
	rng := rand.New(rand.NewPCG(1, 2))
	want := model{}
	value := make([]byte, 4000)
	var handles []Handle
	for interval := range 2 {
		for i := range 5000 {
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			c := change{kg: uint32(i % 16), state: 1, op: OpPut, key: fmt.Sprintf("k%d", i%3000), value: string(value)}
			mustAppend(t, ws[i%2], c)
			replay(want, []change{c}, 0, 1)
		}
		objects := l.Metrics().Objects
		for _, w := range ws {
			h := mustPersistUpto(t, w, 0, w.Cut())
			if n := len(h.Objects); n != interval+1 {
				t.Fatalf("interval %d: writer %s's handle names %d objects, want one per interval: %v", interval, w.Name(), n, h.Objects)
			}
			handles = append(handles, h)
		}
		if n := l.Metrics().Objects - objects; n != 1 {
			t.Fatalf("interval %d: %d objects, want 1", interval, n)
		}
	}
	m := l.Metrics()
	if m.Parts < 4 || m.Batches < 6 {
		t.Fatalf("metrics %+v: want several batches streamed as parts", m)
	}
	t.Logf("%d batches, %d objects, %d parts; store requests %v", m.Batches, m.Objects, m.Parts, reqs.Requests())
	got := newSyncModel()
	if err := Read(context.Background(), store, ReadOptions{}, handles[len(handles)-2:], 0, 16, got.apply); err != nil {
		t.Fatal(err)
	}
	if d := diff(got.m, want); d != "" {
		t.Fatalf("replay:\n%s", d)
	}
}
