package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eddyflow/eddy/connector/kafka"
)

// TestPartitionCount: the count of an existing topic; a missing topic and
// unreachable brokers fail naming them.
func TestPartitionCount(t *testing.T) {
	c := newCluster(t, 7, "seven")
	ctx := context.Background()
	n, err := kafka.PartitionCount(ctx, "seven", kafka.Brokers(c.ListenAddrs()...))
	if err != nil || n != 7 {
		t.Fatalf("PartitionCount(seven) = %d, %v; want 7", n, err)
	}
	if _, err := kafka.PartitionCount(ctx, "nope", kafka.Brokers(c.ListenAddrs()...)); err == nil || !strings.Contains(err.Error(), `"nope" does not exist`) {
		t.Fatalf("a missing topic: %v, want it named", err)
	}
	if _, err := kafka.PartitionCount(ctx, "seven", kafka.Brokers("127.0.0.1:1"), kafka.ConnectTimeout(500*time.Millisecond)); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable brokers: %v, want them named", err)
	}
}
