package snapshot

import (
	"context"
	"fmt"
	"sync"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/internal/errs"
	"github.com/eddyflow/eddy/internal/manifest"
)

// Part is one keyed operator's serialized state in one subtask, to be
// written to Name.
type Part struct {
	UID                        string // the operator's id
	Subtask                    int
	KeyGroupStart, KeyGroupEnd int
	Name                       string // where it goes in the store
	Data                       []byte
	// Release, if not nil, is called once Data is no longer needed
	// (written, failed or dropped), to recycle its buffer.
	Release func()
	// Upload, if not nil, writes the part instead of a Put of Data to Name:
	// a Pebble checkpoint's files and header. It returns the part for the
	// manifest and the bytes it uploaded.
	Upload func(ctx context.Context, store blob.Store) (checkpoint.StatePart, int64, error)
}

// Wait blocks until something the checkpoint depends on is durable (the
// changelog up to the barrier), or fails; its error fails the job over,
// not only the checkpoint.
type Wait func(ctx context.Context) error

// Acker sends one subtask's acknowledgements in barrier order.
type Acker struct {
	send  func(ctx context.Context, a manifest.Ack) error
	wg    *sync.WaitGroup
	acked chan struct{} // closed once the last ack has been sent; nil if sent at its barrier
}

// NewAcker returns the acker of one subtask: send hands an ack to the
// coordinator; background work is counted in wg, which the attempt waits
// for.
func NewAcker(send func(ctx context.Context, a manifest.Ack) error, wg *sync.WaitGroup) *Acker {
	return &Acker{send: send, wg: wg}
}

// Ack sends *a once parts are written to store (each recorded in a.Parts,
// with a.Bytes) and every wait has returned, after the subtask's previous
// ack. A wait may fill in *a (the changelog adds its log ranges once they
// are durable); the caller must not touch *a after Ack. Without parts, waits or an earlier ack still in flight, it sends a
// before returning; otherwise it returns at once and the rest runs in the
// background. A part that fails to be written fails the checkpoint (a.Err,
// a storage error); a wait that fails fails the job (a.Fatal). store nil
// means the job keeps no checkpoints: parts are dropped and nothing is
// waited for.
func (k *Acker) Ack(ctx context.Context, a *manifest.Ack, store blob.Store, parts []Part, waits []Wait) error {
	if store == nil {
		release(parts)
		parts, waits = nil, nil
	}
	prev := k.acked
	prevSent := prev == nil
	if !prevSent {
		select {
		case <-prev:
			prevSent = true
		default:
		}
	}
	if len(parts) == 0 && len(waits) == 0 && prevSent {
		k.acked = nil
		return k.send(ctx, *a)
	}
	sent := make(chan struct{})
	k.acked = sent
	send := func() {
		defer close(sent)
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		_ = k.send(ctx, *a)
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer release(parts)
		for _, wait := range waits {
			if err := wait(ctx); err != nil {
				// The log could not be made durable: it is broken, and
				// only a restart from the last checkpoint repairs it.
				a.Err, a.Fatal = err, true
				send()
				return
			}
		}
		for _, p := range parts {
			if p.Upload != nil {
				sp, n, err := p.Upload(ctx, store)
				if err != nil {
					a.Err = errs.Kind(errs.Storage, fmt.Errorf("writing state of %s subtask %d: %w", p.UID, p.Subtask, err), false)
					break
				}
				a.Parts = append(a.Parts, manifest.OpPart{UID: p.UID, Part: sp})
				a.Bytes += n
				continue
			}
			if err := store.Put(ctx, p.Name, p.Data); err != nil {
				a.Err = errs.Kind(errs.Storage, fmt.Errorf("writing state of %s subtask %d to %s: %w", p.UID, p.Subtask, p.Name, err), false)
				break
			}
			a.Parts = append(a.Parts, manifest.OpPart{UID: p.UID, Part: checkpoint.StatePart{Subtask: uint32(p.Subtask),
				KeyGroupStart: uint32(p.KeyGroupStart), KeyGroupEnd: uint32(p.KeyGroupEnd), Blob: p.Name, Size: int64(len(p.Data)), CRC: blob.Checksum(p.Data)}})
			a.Bytes += int64(len(p.Data))
		}
		send()
	}()
	return nil
}

func release(parts []Part) {
	for _, p := range parts {
		if p.Release != nil {
			p.Release()
		}
	}
}
