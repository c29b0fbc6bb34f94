package state

import (
	"fmt"
)

// PartInfo is what a snapshot part holds, read without a backend and without
// the Go types of its state: the schemas (in serde's binary form) and the
// framed entries. Tools use it to inspect and verify checkpoints; a restore
// uses Backend.RestorePart instead. The Data of its groups alias the part.
type PartInfo struct {
	MaxParallelism int
	KeySchema      []byte      // serde.Schema.MarshalBinary of the key type
	States         []PartState // every state declared when the part was made, in declaration order
	Groups         []PartGroup // in the order stored: key groups ascending, states in declaration order
	Watermark      int64       // Unix nanoseconds, when HasWatermark
	HasWatermark   bool
	// Header is set for a state header (Backend.AppendHeader) of a
	// store-backed backend's checkpoint: schemas and watermark, and no
	// groups, as the entries are in the store's files.
	Header bool
}

// PartState describes one state of a snapshot part.
type PartState struct {
	Name        string
	Kind        string // "value", "reducing", "list" or "map"
	ValueSchema []byte // serde.Schema.MarshalBinary of the value type stored per key
}

// PartGroup is the entries of one state in one key group of a part.
type PartGroup struct {
	KeyGroup int
	State    int    // index into PartInfo.States
	Count    int    // entries in Data
	Data     []byte // Count entries: uvarint(len key) key uvarint(len value) value
}

// ReadPart decodes the header and group framing of a snapshot part (the
// payload of a state blob, see docs/snapshot.md). It checks the magic, the
// protobuf framing and that every group refers to a state of the part, but
// neither the schemas nor the entries: see PartGroup.Entries. It never
// panics on bad input.
func ReadPart(part []byte) (*PartInfo, error) {
	header := len(part) >= len(headerMagic) && string(part[:len(headerMagic)]) == headerMagic
	if !header && (len(part) < len(snapshotMagic) || string(part[:len(snapshotMagic)]) != snapshotMagic) {
		return nil, &RestoreError{Reason: "not a state snapshot (bad magic)"}
	}
	body := part[len(snapshotMagic):]
	if header {
		body = part[len(headerMagic):]
	}
	var h snapshotHeader
	if err := decodeSnapshot(body, &h); err != nil {
		return nil, &RestoreError{Reason: err.Error()}
	}
	if header && len(h.Groups) != 0 {
		return nil, &RestoreError{Reason: "state header: " + errHeaderEntries.Error()}
	}
	info := &PartInfo{MaxParallelism: int(h.MaxParallelism), KeySchema: h.KeySchema, Header: header}
	if h.Watermark != nil {
		info.Watermark, info.HasWatermark = *h.Watermark, true
	}
	for _, s := range h.States {
		info.States = append(info.States, PartState{Name: s.Name, Kind: s.Kind, ValueSchema: s.ValueSchema})
	}
	for _, g := range h.Groups {
		if int(g.State) >= len(h.States) {
			return nil, &RestoreError{Reason: fmt.Sprintf("key group %d refers to state %d of %d", g.KeyGroup, g.State, len(h.States))}
		}
		info.Groups = append(info.Groups, PartGroup{KeyGroup: int(g.KeyGroup), State: int(g.State), Count: int(g.Count), Data: g.Data})
	}
	return info, nil
}

// Entries calls fn with the key and value bytes of each entry of g, in
// stored order, until fn returns an error, which Entries returns. The
// slices alias the part. A framing error (a bad length, fewer entries than
// Count, bytes after the last) is returned naming the entry.
func (g PartGroup) Entries(fn func(key, value []byte) error) error {
	data := g.Data
	for n := 0; n < g.Count; n++ {
		k, rest, err := lenPrefixed(data)
		if err != nil {
			return fmt.Errorf("key group %d: entry %d key: %w", g.KeyGroup, n, err)
		}
		v, rest, err := lenPrefixed(rest)
		if err != nil {
			return fmt.Errorf("key group %d: entry %d value: %w", g.KeyGroup, n, err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
		data = rest
	}
	if len(data) != 0 {
		return fmt.Errorf("key group %d: %d bytes after the last entry", g.KeyGroup, len(data))
	}
	return nil
}
