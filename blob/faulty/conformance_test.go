package faulty_test

import (
	"testing"

	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/blob/blobtest"
	"github.com/eddyflow/eddy/blob/faulty"
	"github.com/eddyflow/eddy/blob/file"
)

// With no faults, the wrapper is a store like any other.
func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		inner, err := file.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return faulty.New(inner, faulty.Options{})
	})
}
