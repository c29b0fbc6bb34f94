package pebble

// Health is a DB's state as plain values, for metrics.
type Health struct {
	// L0Sublevels is the number of sublevels of L0: reads consult each, and
	// compactions start at 12 and writes stop at 48.
	L0Sublevels int
	// L0Files is the number of files in L0.
	L0Files int64
	// CompactionDebt estimates the bytes compactions must rewrite for the
	// LSM to settle; steady growth means writes outpace compactions.
	CompactionDebt uint64
	// CacheHits and CacheMisses count lookups of the pool's block cache,
	// which all its DBs share: the same for every DB of a pool.
	CacheHits, CacheMisses int64
	// DiskBytes is the space the DB's files take on disk, including files
	// a checkpoint still holds.
	DiskBytes uint64
	// MemTableBytes is what the DB's memtables hold.
	MemTableBytes uint64
}

// CacheHitRate returns the share of block cache lookups that hit, or 0
// without lookups.
func (h Health) CacheHitRate() float64 {
	if n := h.CacheHits + h.CacheMisses; n > 0 {
		return float64(h.CacheHits) / float64(n)
	}
	return 0
}

// Health returns the DB's health. It may be called from any goroutine.
func (d *DB) Health() Health {
	m := d.db.Metrics()
	return Health{
		L0Sublevels:    int(m.Levels[0].Sublevels),
		L0Files:        m.Levels[0].TablesCount,
		CompactionDebt: m.Compact.EstimatedDebt,
		CacheHits:      m.BlockCache.Hits,
		CacheMisses:    m.BlockCache.Misses,
		DiskBytes:      m.DiskSpaceUsage(),
		MemTableBytes:  m.MemTable.Size,
	}
}
