package faulty_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eddyflow/eddy/blob/faulty"
)

func Example() {
	inner := newMem() // any blob.Store, e.g. a blob/file store
	s := faulty.New(inner, faulty.Options{
		Latency:   faulty.ObjectStore(),
		Scale:     0.001, // 1000× faster than a real object store
		ErrorRate: 0.5,
		Seed:      3,
		PutOnly:   true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range 4 {
		name := fmt.Sprintf("changelog/%d", i)
		err := s.Put(ctx, name, []byte("segment"))
		var ie *faulty.InjectedError
		switch {
		case err == nil:
			fmt.Println(name, "stored")
		case errors.As(err, &ie) && ie.Written:
			fmt.Println(name, "failed, but was stored")
		case errors.Is(err, faulty.ErrInjected):
			fmt.Println(name, "failed")
		}
	}
	st := s.Stats().Put
	fmt.Println(st.Calls, "calls,", st.Errors, "injected errors")
	// Output:
	// changelog/0 stored
	// changelog/1 failed
	// changelog/2 failed, but was stored
	// changelog/3 failed
	// 4 calls, 3 injected errors
}
