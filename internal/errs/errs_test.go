package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/eddyflow/eddy/connector"
)

func TestKind(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/data/x", Err: errors.New("no space left on device")}
	err := fmt.Errorf("checkpoint 4: %w", Kind(Storage, cause, false))
	if !errors.Is(err, Storage) || errors.Is(err, CorruptCheckpoint) || IsPermanent(err) {
		t.Fatalf("kinds of %v wrong", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/data/x" {
		t.Fatalf("errors.As lost the cause of %v", err)
	}
	if got := err.Error(); got != "checkpoint 4: open /data/x: no space left on device" {
		t.Fatalf("message %q", got)
	}
	if !IsPermanent(Kind(IncompatibleState, cause, true)) || !IsPermanent(connector.Permanent(cause)) {
		t.Fatal("permanent marks lost")
	}
	if Kind(Storage, nil, true) != nil || connector.Permanent(nil) != nil {
		t.Fatal("nil wrapped")
	}
}
