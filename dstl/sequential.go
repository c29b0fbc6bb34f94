package dstl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/eddyflow/eddy/blob"
)

// ErrOutOfOrder is returned by ReadSequential for handles whose objects do
// not hold a writer's changes in sequence order; Read replays such handles
// correctly.
var ErrOutOfOrder = errors.New("dstl: the handles' objects are not in log order")

// DefaultSequentialWindow is ReadOptions.Fetches' default for
// ReadSequential: the objects fetched ahead of the one being applied.
const DefaultSequentialWindow = 4

// ReadSequential replays the changes the handles describe whose key group
// is in [kgStart, kgEnd), like Read, but applies every selected change in
// log order, one object after another, while fetching at most
// opts.Fetches objects ahead (DefaultSequentialWindow if not positive).
// Its memory is that window's, whatever the length of the log: Read holds
// every object of the handles at once to apply only the changes no later
// change replaces, which costs as much memory as the log since the last
// materialization. ReadSequential suits a backend whose state lives in a
// store on disk (state/pebble), where a write costs little and memory is
// what is bounded; the state after it is the same as after Read.
//
// The writers are replayed one after another, in the order they first
// appear in handles (the order Read applies the writers of a key group
// in), each from the objects its handles list, ordered by where the
// handles start; of an object it applies the writer's section only, so an
// object that several of the writers share is read once for each (with
// opts.Shared, once while any holds it). A writer's changes must come in
// sequence order across its objects (a change listed again by an
// overlapping handle is applied once); objects that break that order make
// it fail with an error matching ErrOutOfOrder, having applied only
// changes in order, and the caller then replays the handles with Read.
// Like Read, it verifies every object and that each handle's last change
// is present. apply is called from one goroutine; the change aliases
// ReadSequential's buffers.
func ReadSequential(ctx context.Context, store blob.Store, opts ReadOptions, handles []Handle, kgStart, kgEnd uint32,
	apply func(c *Change) error) error {
	if kgStart > kgEnd {
		return fmt.Errorf("dstl: read: key-group range [%d,%d) is inverted", kgStart, kgEnd)
	}
	handles = logOrder(handles)
	writers, _, crcs, uploads, err := planRead(handles)
	if err != nil {
		return err
	}
	// The steps: each writer's objects, in order.
	type step struct {
		writer string
		w      *writerInfo
		name   string
	}
	var steps []step
	listed := map[[2]string]bool{}
	for _, h := range handles {
		for _, o := range h.Objects {
			if k := [2]string{h.Writer, o}; !listed[k] {
				listed[k] = true
				steps = append(steps, step{h.Writer, writers[h.Writer], o})
			}
		}
	}
	window := opts.Fetches
	if window <= 0 {
		window = DefaultSequentialWindow
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Fetch in order, at most window objects ahead of the one applied.
	type fetched struct {
		o   *Batch
		err error
	}
	var st fetchStats
	results := make([]chan fetched, len(steps))
	for i := range results {
		results[i] = make(chan fetched, 1)
	}
	slots := make(chan struct{}, window)
	var started atomic.Int64 // fetches started; each sends one result
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i, sp := range steps {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			started.Add(1)
			go func() {
				want, check := crcs[sp.name]
				up := uploads[sp.name]
				var f fetched
				if opts.Shared != nil {
					f.o, f.err = opts.Shared.acquire(ctx, sp.name, func() (*Batch, error) {
						return fetchOne(ctx, store, opts.LocalDir, opts.Hedger, sp.name, want, check, up, nil, &st)
					})
					if f.err == nil && check && f.o.crc != want {
						opts.Shared.Release(map[string]*Batch{sp.name: f.o})
						f.o, f.err = nil, wrongObject(sp.name, f.o.crc, want)
					}
				} else {
					only := func(w string) bool { return w == sp.writer }
					f.o, f.err = fetchOne(ctx, store, opts.LocalDir, opts.Hedger, sp.name, want, check, up, only, &st)
				}
				results[i] <- f
			}()
		}
	}()
	consumed := 0
	defer func() {
		// On an error, the fetches started ahead: wait for them (ctx is
		// cancelled) and give back what they got from opts.Shared.
		cancel()
		<-produced
		for j := consumed; j < int(started.Load()); j++ {
			if f := <-results[j]; f.o != nil && opts.Shared != nil {
				opts.Shared.Release(map[string]*Batch{steps[j].name: f.o})
			}
		}
	}()

	sawUpto := make([]bool, len(handles))
	var applied, skipped int64
	var last uint64 // the current writer's last applied sequence number
	var c Change
	for i, sp := range steps {
		var f fetched
		select {
		case f = <-results[i]:
		case <-ctx.Done():
			return fmt.Errorf("dstl: read: %w", ctx.Err())
		}
		consumed = i + 1
		if f.err != nil {
			return f.err
		}
		if i == 0 || steps[i-1].w != sp.w {
			last = 0
		}
		err := func() error {
			if opts.Shared != nil {
				defer opts.Shared.Release(map[string]*Batch{sp.name: f.o})
			}
			for si := range f.o.sections {
				s := &f.o.sections[si]
				if s.writer != sp.writer {
					continue
				}
				for ri := range s.recs {
					r := &s.recs[ri]
					in := false
					for _, span := range sp.w.spans {
						if r.seq == span.upto {
							sawUpto[span.handle] = true
						}
						in = in || r.seq > span.after && r.seq <= span.upto
					}
					if !in || r.kg < kgStart || r.kg >= kgEnd {
						skipped++
						continue
					}
					if r.seq <= last {
						if r.seq < last {
							return fmt.Errorf("%w: object %q holds change %d of writer %q after change %d", ErrOutOfOrder, sp.name, r.seq, s.writer, last)
						}
						skipped++ // the same change in two objects
						continue
					}
					last = r.seq
					s.change(r, &c)
					if err := apply(&c); err != nil {
						return err
					}
					applied++
				}
			}
			return nil
		}()
		<-slots
		if err != nil {
			return err
		}
	}
	for i, h := range handles {
		if h.After < h.Upto && !sawUpto[i] {
			return fmt.Errorf("dstl: read: handle of writer %q (%d,%d]: its objects %q hold no change %d; an object is missing, stale or replaced",
				h.Writer, h.After, h.Upto, h.Objects, h.Upto)
		}
	}
	if opts.Stats != nil {
		*opts.Stats = ReadStats{
			Objects: int64(len(steps)), LocalReads: st.local.Load(), LocalMissing: st.missing.Load(),
			LocalCorrupt: st.corrupt.Load(), RemoteReads: st.remote.Load(), Completed: st.completed.Load(), Applied: applied, Skipped: skipped,
		}
	}
	return nil
}

// logOrder returns a copy of handles ordered by writer, the writers in the
// order they first appear, and each writer's handles by where they start:
// a writer's objects then come in the order it wrote them (a restarted
// writer's handle may be listed before its earlier run's).
func logOrder(handles []Handle) []Handle {
	ord := map[string]int{}
	for _, h := range handles {
		if _, ok := ord[h.Writer]; !ok {
			ord[h.Writer] = len(ord)
		}
	}
	out := slices.Clone(handles)
	slices.SortStableFunc(out, func(a, b Handle) int {
		return cmp.Or(cmp.Compare(ord[a.Writer], ord[b.Writer]), cmp.Compare(a.After, b.After), cmp.Compare(a.Upto, b.Upto))
	})
	return out
}
