package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKcatInterop checks the connector against a client Eddy did not write:
// kcat (librdkafka) produces the input, and reads the exactly-once output
// with read_committed isolation. It runs when EDDY_KCAT=1 and kcat is
// installed (.ci/run installs it); kfake listens on EDDY_KCAT_PORT (default
// 39092).
func TestKcatInterop(t *testing.T) {
	if os.Getenv("EDDY_KCAT") != "1" {
		t.Skip("set EDDY_KCAT=1 to run the kcat interop test")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	port := 39092
	if p := os.Getenv("EDDY_KCAT_PORT"); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			t.Fatalf("EDDY_KCAT_PORT: %v", err)
		}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(3, "in", "out"))
	if err != nil {
		t.Fatalf("kfake on port %d: %v", port, err)
	}
	defer c.Close()
	broker := fmt.Sprintf("127.0.0.1:%d", port)

	// kcat produces n JSON events, keyed "key:value" lines.
	const n, keys = 3000, 20
	var in bytes.Buffer
	for i := range n {
		k := fmt.Sprintf("k%d", i%keys)
		fmt.Fprintf(&in, "%s\t{\"key\":%q,\"seq\":%d}\n", k, k, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", broker, "-P", "-t", "in", "-K", "\t")
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	// The job, interrupted twice, then run to the end.
	data := filepath.Join(t.TempDir(), "data")
	build := func() *eddy.Env {
		env := eddy.New(eddy.Parallelism(2), eddy.Checkpoints(data, 20*time.Millisecond), eddy.Restarts(0, 0), eddy.LogOutput(testLog{t}))
		events := eddy.FromSource(env, kafka.Source[Event](kafka.Brokers(broker), kafka.Topics("in"), kafka.Bounded(),
			kafka.MaxPartitions(4), kafka.WithDecoder(kafka.JSONValues[Event]())))
		byKey := eddy.KeyBy(events, func(e *Event) string { return e.Key })
		counts := eddy.Process[string, Event, Count](byKey, &countFn{}, eddy.Named("count"))
		eddy.ToSink(counts, kafka.Sink[Count]("out", kafka.Brokers(broker), kafka.WithEncoder(kafka.JSONEncoder[Count]()),
			kafka.Key(func(c *Count) []byte { return []byte(c.Key) })))
		return env
	}
	for _, d := range []time.Duration{60 * time.Millisecond, 120 * time.Millisecond} {
		rctx, rcancel := context.WithTimeout(ctx, d)
		_ = build().Run(rctx)
		rcancel()
	}
	if err := build().Run(ctx); err != nil {
		t.Fatal(err)
	}

	// kcat reads the output with read_committed isolation to the end.
	cmd = exec.CommandContext(ctx, kcat, "-b", broker, "-C", "-t", "out", "-e", "-q",
		"-X", "isolation.level=read_committed", "-o", "beginning", "-f", "%k\t%s\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	var counts []Count
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		var c Count
		if !ok || json.Unmarshal([]byte(v), &c) != nil || c.Key != k {
			t.Fatalf("unexpected kcat output line %q", line)
		}
		counts = append(counts, c)
	}
	checkCounts(t, counts, n, keys)
	t.Logf("kcat read %d committed records", len(counts))
}
