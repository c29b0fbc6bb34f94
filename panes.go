package eddy

import (
	"reflect"
	"slices"
)

// Panes: an event-time sliding window of size/slide panes. A record is
// added to the one pane, a slide long, that holds its time; a window
// fires, when the watermark passes its end, with the Merge of its panes,
// in time order (Flink's window slicing). The index of open windows holds
// each key's windows that have at least one pane, once: a new pane adds
// the windows over it that no other pane of the key has added and that
// have not fired. A window that fires deletes its first pane, which no
// later window covers.
//
// Merge gets the accumulators of stored panes, so panes are used only for
// plain-value accumulators (plainValue): a Merge cannot then change a
// stored pane through a shared map, slice or pointer.

// addToPane adds a record of time ts to its pane, unless every window over
// the pane has fired (a late record), and reports whether it did.
func (f *windowFn[K, IN, ACC, OUT]) addToPane(ctx *Context[K, OUT], ts, wm int64, in *IN) bool {
	p := ts - floorMod(ts, f.w.slide)
	if f.gone(p+f.w.size, wm) { // the last window over the pane, starting at it
		return false
	}
	ps, ok := f.panes.Get(p)
	if !ok {
		ps.End = p + f.w.slide
		f.openPane(ctx, p, wm)
	}
	ps.Acc = f.add(ps.Acc, in)
	f.panes.Put(p, ps)
	return true
}

// openPane adds to the index the windows over a new pane p of the current
// key that have not fired and that no other pane of the key (or a restored
// whole window) has added.
func (f *windowFn[K, IN, ACC, OUT]) openPane(ctx *Context[K, OUT], p, wm int64) {
	others := f.paneBuf[:0]
	for s := range f.panes.All() {
		others = append(others, s)
	}
	f.paneBuf = others
	for end := p + f.w.slide; end <= p+f.w.size; end += f.w.slide {
		if end-1 <= wm || f.covered(others, end) {
			continue
		}
		f.addOpen(ctx.Key, ctx.kb, ctx.kg, end)
	}
}

// covered reports whether the window ending at end is in the index
// already: one of the key's panes starts lies in it, or it was restored
// whole.
func (f *windowFn[K, IN, ACC, OUT]) covered(starts []int64, end int64) bool {
	for _, s := range starts {
		if s >= end-f.w.size && s < end {
			return true
		}
	}
	if f.legacy > 0 {
		if ws, ok := f.st.Get(end - f.w.size); ok && ws.End == end {
			return true
		}
	}
	return false
}

// indexPanes adds the restored panes' windows that have not fired by the
// restored watermark wm to the index, each once per key, and none that a
// restored whole window of the key (whole, by key) has added already.
func (f *windowFn[K, IN, ACC, OUT]) indexPanes(wm int64, whole map[string][]int64) error {
	var key K
	var err error
	var ends []int64
	f.panes.Range(func(kb []byte, kg int, m map[int64]winState[ACC]) bool {
		if f.intKey {
			if err = f.dec(kb, &key); err != nil {
				return false
			}
		}
		ends = ends[:0]
		for p := range m {
			for end := p + f.w.slide; end <= p+f.w.size; end += f.w.slide {
				if end-1 > wm {
					ends = append(ends, end)
				}
			}
		}
		slices.Sort(ends)
		added := whole[string(kb)]
		for _, end := range slices.Compact(ends) {
			if !slices.Contains(added, end) {
				f.addOpen(key, kb, kg, end)
			}
		}
		return true
	})
	return err
}

// firePanes fires the window [start, end) of the current key from its
// panes (and a restored whole window of it, if any), then deletes its
// first pane.
func (f *windowFn[K, IN, ACC, OUT]) firePanes(ctx *Context[K, OUT], start, end int64) error {
	var acc ACC
	found := false
	if f.legacy > 0 {
		if ws, ok := f.st.Get(start); ok && ws.End == end {
			acc, found = ws.Acc, true
			f.st.Delete(start)
			f.legacy--
		}
	}
	for s := start; s < end; s += f.w.slide {
		ps, ok := f.panes.Get(s)
		if !ok {
			continue
		}
		if found {
			acc = f.merge(acc, ps.Acc)
		} else {
			acc, found = ps.Acc, true
		}
	}
	if !found {
		return nil
	}
	err := f.fire(ctx, start, winState[ACC]{End: end, Acc: acc})
	f.panes.Delete(start)
	return err
}

// plainValue reports whether T holds no pointers, slices, maps, channels,
// functions or interfaces: a copy of a T shares nothing with the original.
func plainValue[T any]() bool {
	return plainType(reflect.TypeFor[T]())
}

func plainType(t reflect.Type) bool {
	return everyLeaf(t, func(t reflect.Type) bool {
		switch t.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
			return true
		}
		return false
	})
}

// everyLeaf reports whether leaf holds for every type t is built of
// through arrays and struct fields (t itself if it is neither).
func everyLeaf(t reflect.Type, leaf func(reflect.Type) bool) bool {
	switch t.Kind() {
	case reflect.Array:
		return everyLeaf(t.Elem(), leaf)
	case reflect.Struct:
		for i := range t.NumField() {
			if !everyLeaf(t.Field(i).Type, leaf) {
				return false
			}
		}
		return true
	}
	return leaf(t)
}
