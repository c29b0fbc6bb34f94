package changelog

import (
	"fmt"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/dstl"
)

// OpenLog opens an attempt's durable short-term log on store: its objects
// are named under the id of the checkpoint being built (building) and the
// attempt's run token, so the checkpoint store's garbage collection
// truncates the log once no retained checkpoint lists an object, and two
// attempts never write the same name. It also returns the hedger that
// materialized parts' uploads share, tuned like the log's uploads.
func OpenLog(store blob.Store, cfg *Config, building func() uint64, runID string) (*dstl.Log, *blob.Hedger, error) {
	opts := cfg.Log
	opts.ObjectName = func(seq uint64) string {
		return fmt.Sprintf("checkpoints/%020d/dstl-%s-%d", building(), runID, seq)
	}
	log, err := dstl.Open(store, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("eddy: changelog: %w", err)
	}
	o := log.Options()
	return log, blob.NewHedger(o.HedgeAfterP90, o.UploadTimeout), nil
}
