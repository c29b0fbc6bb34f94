// Package faulty wraps a blob.Store and injects the faults of a remote
// object store: latency drawn from a (long-tailed) distribution, failed
// calls and hung calls. Tests and benchmarks of the changelog and the DSTL
// use it to see how Eddy behaves when uploads are slow, fail or never
// return.
//
//	inner, _ := file.New(t.TempDir())
//	s := faulty.New(inner, faulty.Options{
//		Latency:   faulty.ObjectStore(), // p50 20ms, p99 200ms, p99.9 3s
//		Scale:     0.01,                 // ...but 100× faster
//		ErrorRate: 0.01,
//		StallRate: 0.001,
//		Seed:      42,
//	})
//
// Every call to the wrapper (or, with Options.PutOnly, every Put) decides,
// from a random generator seeded with Options.Seed, whether it stalls,
// whether it fails and how long it is delayed. The decisions for the n-th
// call are the same in every run with the same seed, so a single-goroutine
// test sees the same fault sequence every time; with concurrent callers the
// order in which calls reach the generator, and so who gets which fault,
// varies.
//
// A call is handled in this order:
//
//  1. Stall (probability StallRate): the call waits until its context is
//     done and returns ctx.Err() without touching the inner store. Give
//     such calls a context with a deadline or cancel it, or they hang
//     forever, like a real hung request without a client timeout.
//  2. Latency: the call sleeps for a sample of Latency (times Scale). If the
//     context is done first it returns ctx.Err() without touching the inner
//     store.
//  3. Error (probability ErrorRate): the call fails with an *InjectedError
//     (matching ErrInjected). Get, List and Delete fail without doing the
//     work. Put fails before writing in half the cases and after the inner
//     Put succeeded in the other half (InjectedError.Written is true then),
//     as a real object store does when a request times out after it
//     committed the upload: the caller sees an error but the object is
//     there.
//  4. Otherwise the call is passed to the inner store.
//
// PutIfAbsent (blob.Creator) is passed to the inner store's and meets the
// faults of a Put: it is counted as a Put and draws from Put's generator.
//
// Stats reports, per operation, the calls, injected errors, stalls and the
// total injected latency.
package faulty
