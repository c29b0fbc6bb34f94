package intern

import "iter"

// MinKeys is how many strings a table holds before it sweeps out those no
// longer in use.
const MinKeys = 1024

// Table keeps one copy of each string interned. The zero Table is empty
// and ready.
type Table struct {
	m map[string]string
}

// Intern returns the table's copy of b, adding one if it has none. Before
// adding to a table that has grown to 2*live+MinKeys strings, it forgets
// all but those inUse yields: the owner's strings still referenced, about
// live of them. A sweep thus costs a constant per string added, and a
// string in use keeps its copy.
func (t *Table) Intern(b []byte, live int, inUse iter.Seq[string]) string {
	if k, ok := t.m[string(b)]; ok {
		return k
	}
	if t.m == nil || len(t.m) >= 2*live+MinKeys {
		kept := make(map[string]string, 2*live)
		if t.m != nil {
			for k := range inUse {
				kept[k] = k
			}
		}
		t.m = kept
	}
	k := string(b)
	t.m[k] = k
	return k
}

// Len is the number of strings the table holds.
func (t *Table) Len() int { return len(t.m) }
