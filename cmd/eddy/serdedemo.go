package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"time"

	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/serde"
)

// serdeDemo encodes and decodes --events sample orders, checks every round trip
// and prints sizes, speeds and allocations.
func serdeDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serde", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 7, "seed of the generated events")
	events := fs.Int("events", 200_000, "number of events to encode and decode")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *events < 1 {
		fmt.Fprintln(stderr, "eddy serde: --events must be at least 1")
		return 2
	}
	codec, err := serde.For[datagen.OrderCreatedEvent]()
	if err != nil {
		fmt.Fprintf(stderr, "eddy serde: %v\n", err)
		return 1
	}
	// A pool of distinct orders, cycled through so the run is not one value.
	const distinct = 64
	orders := make([]datagen.OrderCreatedEvent, distinct)
	for i := range orders {
		orders[i] = datagen.SampleOrder(*seed + uint64(i))
	}
	js, _ := json.Marshal(&orders[0])
	pb, err := codec.Append(nil, &orders[0])
	if err != nil {
		fmt.Fprintf(stderr, "eddy serde: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "eddy serde: serde on OrderCreatedEvent (%d line items, seed %d)\n", len(orders[0].Items), *seed)
	fmt.Fprintf(stdout, "  size:    %d protobuf bytes, %d JSON bytes (%.1fx smaller)\n", len(pb), len(js), float64(len(js))/float64(len(pb)))

	// Encode every event into one reused buffer, keeping the encodings so
	// the decode pass can check them.
	encoded := make([][]byte, distinct)
	buf := make([]byte, 0, 4096)
	encodeTime, encodeAllocs, err := measure(func() error {
		for i := 0; i < *events; i++ {
			if buf, err = codec.Append(buf[:0], &orders[i%distinct]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "eddy serde: encode: %v\n", err)
		return 1
	}
	for i := range encoded {
		encoded[i], _ = codec.Append(nil, &orders[i])
	}
	var out datagen.OrderCreatedEvent
	mismatch := -1
	decodeTime, decodeAllocs, err := measure(func() error {
		for i := 0; i < *events; i++ {
			if err := codec.Decode(encoded[i%distinct], &out); err != nil {
				return err
			}
			if i < distinct && !reflect.DeepEqual(out, orders[i]) {
				mismatch = i
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "eddy serde: decode: %v\n", err)
		return 1
	}
	if mismatch >= 0 {
		fmt.Fprintf(stderr, "eddy serde: event %d did not survive the round trip\n", mismatch)
		return 1
	}
	n := float64(*events)
	fmt.Fprintf(stdout, "  encode:  %d events in %v: %.0f ns/event, %.2f allocs/event, %.0f MB/s\n",
		*events, encodeTime.Round(time.Millisecond), float64(encodeTime.Nanoseconds())/n, float64(encodeAllocs)/n,
		n*float64(len(pb))/encodeTime.Seconds()/1e6)
	fmt.Fprintf(stdout, "  decode:  %d events in %v: %.0f ns/event, %.2f allocs/event (into a reused value)\n",
		*events, decodeTime.Round(time.Millisecond), float64(decodeTime.Nanoseconds())/n, float64(decodeAllocs)/n)
	fmt.Fprintf(stdout, "  checked: %d distinct events decode equal to what was encoded\n", distinct)
	return 0
}

// measure runs fn once and returns its wall time and heap allocation count.
func measure(fn func() error) (time.Duration, uint64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := fn()
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.Mallocs - before.Mallocs, err
}
