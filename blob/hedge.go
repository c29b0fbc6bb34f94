package blob

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PutHedged stores data under name like s.Put, but hedges against a slow
// store: when no attempt has finished after `after`, it starts another
// attempt of the same write in parallel, and again after each further
// `after` or failure, up to attempts in all. The first attempt to succeed
// wins and the others are cancelled. Every attempt writes the same bytes
// under the same name, so it suits objects whose name fixes their content
// (a checkpoint's manifest). It returns the last attempt's error when all
// fail, or the context's error. It returns once every attempt it started
// has returned (the cancelled ones give up at once on a store that honours
// its context), so no write of data lands after it.
func PutHedged(ctx context.Context, s Store, name string, data []byte, after time.Duration, attempts int) error {
	if attempts < 1 {
		attempts = 1
	}
	actx, cancel := context.WithCancel(ctx)
	results := make(chan error, attempts)
	launched, done := 0, 0
	launch := func() {
		launched++
		go func() { results <- s.Put(actx, name, data) }()
	}
	defer func() {
		cancel()
		for ; done < launched; done++ {
			<-results
		}
	}()
	launch()
	failed := 0
	timer := time.NewTimer(after)
	defer timer.Stop()
	var errs []error
	for {
		select {
		case err := <-results:
			done++
			if err == nil {
				return nil
			}
			failed++
			errs = append(errs, err)
			if failed == attempts {
				return fmt.Errorf("blob: put %q: %d attempts failed: %w", name, attempts, errors.Join(errs...))
			}
			if launched == failed && launched < attempts {
				launch()
			}
		case <-timer.C:
			if launched < attempts {
				launch()
				timer.Reset(after)
			}
		case <-ctx.Done():
			return fmt.Errorf("blob: put %q: %w", name, ctx.Err())
		}
	}
}
