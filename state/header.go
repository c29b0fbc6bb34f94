package state

import (
	"errors"

	"github.com/eddyflow/eddy/serde"
)

// headerMagic starts a state header (AppendHeader). It differs from
// snapshotMagic so that a snapshot reader refuses a header instead of
// restoring no entries from it.
const headerMagic = "EDSH\x01"

// AppendHeader appends the state header of the backend to dst: the key and
// value schemas of its states and its watermark, without entries. It is
// what a checkpoint of a store-backed backend records next to its store's
// own files, which hold the entries but not the schemas. The runtime calls
// it between two batches, after Flush.
func (b *Backend) AppendHeader(dst []byte) ([]byte, error) {
	h, err := b.snapshotHeader()
	if err != nil {
		return dst, err
	}
	dst = append(dst, headerMagic...)
	return serde.MustFor[snapshotHeader]().Append(dst, &h)
}

// RestoreHeader checks a header written by AppendHeader against the
// declared states, as RestorePart checks a snapshot part (max parallelism,
// the key schema and each state's kind and value schema), and takes its
// watermark if it is the least restored so far. It loads no entries: a
// store-backed backend's store was restored from the checkpoint's files
// before. A backend whose state is in the heap refuses a header, as it
// has nowhere to find the entries.
func (b *Backend) RestoreHeader(header []byte) error {
	if b.store == nil {
		return &RestoreError{Reason: "the checkpoint holds this state in Pebble files, and the job keeps state in the heap; run the job with the Pebble state backend to restore it"}
	}
	if len(header) < len(headerMagic) || string(header[:len(headerMagic)]) != headerMagic {
		return &RestoreError{Reason: "not a state header (bad magic)"}
	}
	var h snapshotHeader
	if err := serde.MustFor[snapshotHeader]().Decode(header[len(headerMagic):], &h); err != nil {
		return &RestoreError{Reason: "state header: " + err.Error()}
	}
	if len(h.Groups) != 0 {
		return &RestoreError{Reason: "state header: " + errHeaderEntries.Error()}
	}
	if err := b.checkHeader(&h); err != nil {
		return err
	}
	if h.Watermark != nil && (!b.hasWatermark || *h.Watermark < b.watermark) {
		b.watermark, b.hasWatermark = *h.Watermark, true
	}
	return nil
}

var errHeaderEntries = errors.New("holds entries; a header has none")
