package parallel

import (
	"context"
	"sync"
)

// ForEach runs f(ctx, i) for i in [0, n), at most conc at once, and
// returns the first error, cancelling the context of the calls still
// running and starting no more.
func ForEach(ctx context.Context, n, conc int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, max(conc, 1))
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
