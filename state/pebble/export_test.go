package pebble

// NoAutoCompactions turns automatic compactions off, so a test can count
// on the files of one checkpoint still being there at the next.
func NoAutoCompactions() PoolOption { return func(c *poolConfig) { c.noCompactions = true } }
