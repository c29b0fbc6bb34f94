package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
	"github.com/eddyflow/eddy/internal/errs"
)

// TestCheckpointWatermark: a restore takes the least watermark recorded
// for the key groups it owns, from any parallelism, and none when none
// overlaps.
func TestCheckpointWatermark(t *testing.T) {
	wms := []checkpoint.Watermark{{KeyGroupStart: 0, KeyGroupEnd: 43, Nanos: 500},
		{KeyGroupStart: 43, KeyGroupEnd: 86, Nanos: 300}, {KeyGroupStart: 86, KeyGroupEnd: 128, Nanos: 900}}
	for _, c := range []struct {
		start, end int
		want       int64
		ok         bool
	}{{0, 43, 500, true}, {0, 64, 300, true}, {64, 128, 300, true}, {86, 128, 900, true}, {100, 110, 900, true}} {
		got, ok := Watermark(wms, c.start, c.end)
		if got != c.want || ok != c.ok {
			t.Errorf("[%d, %d): %d, %v; want %d, %v", c.start, c.end, got, ok, c.want, c.ok)
		}
	}
	if _, ok := Watermark(wms[:1], 43, 128); ok {
		t.Error("a watermark of other key groups was taken")
	}
}

// TestFailure: a corrupt or missing object makes the checkpoint unusable
// (an *Error, which falls back, naming the checkpoint); any other error is a
// storage error that a restart retries on the same checkpoint.
func TestFailure(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		fallback bool
	}{
		{"corrupt blob", &blob.CorruptError{Name: "checkpoints/7/a.state", Reason: "bad trailer"}, true},
		{"missing blob", fmt.Errorf("get x: %w", blob.ErrNotFound), true},
		{"corrupt log object", fmt.Errorf("read: %w", dstl.ErrCorrupt), true},
		{"network", errors.New("connection reset"), false},
		{"disk", &fs.PathError{Op: "read", Path: "/data/x", Err: syscall.EIO}, false},
	} {
		err := Failure(7, c.err)
		var re *Error
		if got := errors.As(err, &re); got != c.fallback {
			t.Errorf("%s: falls back %v, want %v (%v)", c.name, got, c.fallback, err)
			continue
		}
		if c.fallback {
			if re.ID != 7 || !errors.Is(err, errs.CorruptCheckpoint) || !errors.Is(err, c.err) {
				t.Errorf("%s: %v", c.name, err)
			}
		} else if !errors.Is(err, errs.Storage) || !errors.Is(err, c.err) {
			t.Errorf("%s: want a storage error wrapping the cause, got %v", c.name, err)
		}
	}
}
