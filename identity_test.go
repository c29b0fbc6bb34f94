package eddy_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/discard"
	"github.com/eddyflow/eddy/connector/file"
)

// TestDuplicateIDs: two checkpointed parts of a job with one id fail Run
// before anything starts, naming both places; distinct UIDs fix it.
func TestDuplicateIDs(t *testing.T) {
	gps := func() eddy.Source[datagen.GPSPoint] { return datagen.GPS(datagen.Events(10)) }
	key := func(p *datagen.GPSPoint) string { return p.DriverID }
	sum := func(a, b datagen.GPSPoint) datagen.GPSPoint { return a }
	cases := []struct {
		name  string
		build func(env *eddy.Env, dir string)
		want  string // in the error, besides this file's name
	}{
		{"two sources of one connector", func(env *eddy.Env, dir string) {
			eddy.ToSink(eddy.FromSource(env, gps()), file.JSONLines[datagen.GPSPoint](dir+"/a"))
			eddy.ToSink(eddy.FromSource(env, gps()), file.JSONLines[datagen.GPSPoint](dir+"/b"))
		}, `source "datagen-gps"`},
		{"two operators named alike", func(env *eddy.Env, dir string) {
			ks := eddy.KeyBy(eddy.FromSource(env, gps()), key)
			eddy.ToSink(eddy.Reduce(ks, sum, eddy.Named("r")), file.JSONLines[datagen.GPSPoint](dir+"/a"))
			eddy.ToSink(eddy.Reduce(ks, sum, eddy.Named("r")), file.JSONLines[datagen.GPSPoint](dir+"/b"))
		}, `keyed operator "r"`},
		{"a window and a process with one UID", func(env *eddy.Env, dir string) {
			ks := eddy.KeyBy(eddy.FromSource(env, gps(), eddy.Watermarks(func(p *datagen.GPSPoint) time.Time { return p.Timestamp }, 0)), key)
			eddy.ToSink(eddy.Reduce(ks, sum, eddy.UID("x")), file.JSONLines[datagen.GPSPoint](dir+"/a"))
			w := eddy.ReduceWindows(ks, eddy.Tumbling(time.Second), sum, eddy.UID("x"))
			eddy.ToSink(w.Results, file.JSONLines[datagen.GPSPoint](dir+"/b"))
		}, `window operator "x"`},
		{"two sinks on one directory spelled apart", func(env *eddy.Env, dir string) {
			src := eddy.FromSource(env, gps())
			eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](dir+"/out"))
			eddy.ToSink(src, file.JSONLines[datagen.GPSPoint](dir+"/./out/"))
		}, `sink "file-jsonlines:`},
		{"two discard sinks", func(env *eddy.Env, dir string) {
			src := eddy.FromSource(env, gps())
			eddy.ToSink(src, discard.Sink[datagen.GPSPoint]())
			eddy.ToSink(src, discard.Sink[datagen.GPSPoint]())
		}, `sink "discard"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			env := eddy.New(eddy.Checkpoints(dir+"/data", time.Second), eddy.Parallelism(1), eddy.LogOutput(&logBuf{}))
			c.build(env, dir)
			err := env.Run(context.Background())
			if !errors.Is(err, eddy.ErrDuplicateID) || !errors.Is(err, eddy.ErrPermanent) {
				t.Fatalf("Run = %v, want ErrDuplicateID", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Count(msg, "identity_test.go:") != 2 {
				t.Fatalf("error %q does not name %s and both places", msg, c.want)
			}
			if _, serr := os.Stat(dir + "/data"); serr == nil {
				t.Fatal("the job touched its checkpoint storage before failing")
			}
		})
	}
	t.Run("distinct UIDs", func(t *testing.T) {
		dir := t.TempDir()
		env := eddy.New(eddy.Checkpoints(dir+"/data", time.Second), eddy.Parallelism(1), eddy.LogOutput(&logBuf{}))
		eddy.ToSink(eddy.FromSource(env, gps(), eddy.UID("gps-a")), file.JSONLines[datagen.GPSPoint](dir+"/a"))
		eddy.ToSink(eddy.FromSource(env, gps(), eddy.UID("gps-b")), file.JSONLines[datagen.GPSPoint](dir+"/b"))
		if err := env.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
