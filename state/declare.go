package state

// Declarer is where keyed state is declared (NewValue, NewList, NewMap,
// NewReducing). A keyed function gets a *Scope in its OpenContext; the
// runtime and this package's tests declare on a *Backend directly. Only
// this package implements it.
type Declarer interface{ backend() *Backend }

func (b *Backend) backend() *Backend { return b }

// Scope is the narrow view of a Backend that user code declares state
// through: it can declare, and nothing else. The backend's runtime
// methods (snapshots, restores, key switching, the change log) are not
// reachable from it.
type Scope struct{ b *Backend }

// NewScope returns the scope of b, for the runtime to hand to a keyed
// function.
func NewScope(b *Backend) *Scope { return &Scope{b: b} }

func (s *Scope) backend() *Backend { return s.b }
