package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
)

// Summary is one line of `eddy checkpoints list`.
type Summary struct {
	ID          uint64    `json:"id"`
	Time        time.Time `json:"time,omitzero"`
	Job         string    `json:"job,omitempty"`
	Size        int64     `json:"size"`   // bytes of state parts and log ranges the manifest lists
	Status      string    `json:"status"` // "complete", "quarantined" or "unreadable"
	Reason      string    `json:"reason,omitempty"`
	Operators   int       `json:"operators"`
	Files       int       `json:"files"`
	Sources     []string  `json:"sources,omitempty"` // per source: name and position summary
	Changelog   bool      `json:"changelog,omitempty"`
	Fingerprint string    `json:"-"`
}

// The statuses of a Summary.
const (
	StatusComplete    = "complete"
	StatusQuarantined = "quarantined"
	StatusUnreadable  = "unreadable"
)

// List summarizes every checkpoint whose manifest exists, oldest first. A
// manifest that does not load is listed as unreadable with the reason; an
// error listing the store is returned.
func List(ctx context.Context, store blob.Store) ([]Summary, error) {
	st := checkpoint.NewStorage(store, 0)
	ids, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	quarantined, err := st.Quarantined(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(ids))
	for _, id := range ids {
		s := Summary{ID: id, Status: StatusComplete}
		m, err := st.Load(ctx, id)
		if err != nil {
			// Listed, so it exists; whatever keeps it from loading
			// (damage, a network error) is what the line says.
			s.Status, s.Reason = StatusUnreadable, err.Error()
		} else {
			s = summarize(m)
		}
		if why, ok := quarantined[id]; ok {
			s.Status, s.Reason = StatusQuarantined, why
		}
		out = append(out, s)
	}
	return out, nil
}

func summarize(m *checkpoint.Manifest) Summary {
	s := Summary{ID: m.ID, Job: m.Job, Status: StatusComplete, Operators: len(m.Operators), Files: len(m.Files),
		Size: manifestSize(m), Fingerprint: m.Fingerprint}
	if m.CreatedAt != 0 {
		s.Time = time.Unix(0, m.CreatedAt).UTC()
	}
	for _, src := range m.Sources {
		s.Sources = append(s.Sources, src.Name+" "+splitsSummary(src.Splits))
	}
	for _, op := range m.Operators {
		if len(op.Changelog) > 0 {
			s.Changelog = true
		}
	}
	return s
}

func manifestSize(m *checkpoint.Manifest) int64 {
	var n int64
	for _, op := range m.Operators {
		for _, p := range op.Parts {
			n += p.Size
			if p.Pebble != nil {
				for _, f := range p.Pebble.Files {
					n += f.Size
				}
			}
		}
		for _, l := range op.Changelog {
			n += l.Size
		}
	}
	return n
}

// splitsSummary says how far a source is: its splits, how many are done,
// and the positions of the others (in the source's encoding, shown as an
// integer when it is a varint-sized number, else hex).
func splitsSummary(splits []checkpoint.SplitState) string {
	done := 0
	var pos []string
	for _, sp := range splits {
		if sp.Done {
			done++
			continue
		}
		if len(pos) < 4 {
			pos = append(pos, fmt.Sprintf("%d@%s", sp.Split, Position(sp.Pos)))
		}
	}
	out := fmt.Sprintf("%d splits, %d done", len(splits), done)
	if len(pos) > 0 {
		out += " (" + strings.Join(pos, " ")
		if len(splits)-done > len(pos) {
			out += " …"
		}
		out += ")"
	}
	return out
}

// Position renders a source position, which is in the source's own
// encoding: hex, at most 16 bytes of it.
func Position(pos []byte) string {
	if len(pos) == 0 {
		return "start"
	}
	if len(pos) > 16 {
		return fmt.Sprintf("%x…(%d bytes)", pos[:16], len(pos))
	}
	return fmt.Sprintf("%x", pos)
}

// FindCheckpoint loads the manifest of the checkpoint named by id, a
// decimal id or "latest": the newest usable checkpoint, as a restore would
// choose it, with why each newer one was passed over in skipped. An id
// that does not exist is an error listing those that do.
func FindCheckpoint(ctx context.Context, store blob.Store, id string) (m *checkpoint.Manifest, skipped []error, err error) {
	st := checkpoint.NewStorage(store, 0)
	if id == "" || id == "latest" {
		m, skipped, err := st.Latest(ctx)
		if err != nil {
			return nil, skipped, err
		}
		if m == nil {
			if len(skipped) > 0 {
				return nil, skipped, fmt.Errorf("no usable checkpoint: %v", errors.Join(skipped...))
			}
			return nil, nil, errors.New("the store holds no checkpoint")
		}
		return m, skipped, nil
	}
	n, err := ParseID(ctx, store, id)
	if err != nil {
		return nil, nil, err
	}
	m, err = st.Load(ctx, n)
	return m, nil, err
}

// ParseID returns the checkpoint id that id names: a decimal id whose
// manifest is listed (it may still be damaged), or "latest", the newest
// listed. An id that does not exist is an error listing those that do.
func ParseID(ctx context.Context, store blob.Store, id string) (uint64, error) {
	st := checkpoint.NewStorage(store, 0)
	ids, err := st.List(ctx)
	if err != nil {
		return 0, err
	}
	if id == "latest" {
		if len(ids) == 0 {
			return 0, errors.New("the store holds no checkpoint")
		}
		return ids[len(ids)-1], nil
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("checkpoint id %q: want a positive integer or \"latest\"", id)
	}
	if !slices.Contains(ids, n) {
		return 0, fmt.Errorf("checkpoint %d does not exist (no %s); the store holds %s", n, st.ManifestName(n), idList(ids))
	}
	return n, nil
}

func idList(ids []uint64) string {
	if len(ids) == 0 {
		return "no checkpoints"
	}
	parts := make([]string, 0, min(len(ids), 10))
	for i, id := range ids {
		if i == 10 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, strconv.FormatUint(id, 10))
	}
	return "checkpoints " + strings.Join(parts, ", ")
}

// FormatBytes renders a byte count for people.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
