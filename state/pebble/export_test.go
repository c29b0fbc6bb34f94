package pebble

// NoAutoCompactions turns automatic compactions off, so a test can count
// on the files of one checkpoint still being there at the next.
func NoAutoCompactions() PoolOption { return func(c *poolConfig) { c.noCompactions = true } }

// OnWriteStall calls stall when a write of a DB of the pool begins to wait
// for Pebble's background work (the memtables are full, or L0 is).
func OnWriteStall(stall func()) PoolOption { return func(c *poolConfig) { c.onStall = stall } }
