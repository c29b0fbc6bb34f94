package group

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hooks remembers the client's last connection error, so that a timeout
// can say why the brokers were unreachable, and hands the group's errors
// to the member.
type hooks struct {
	mu      sync.Mutex
	last    error
	manage  func(error)
	joining func() // a JoinGroup request was written: a rebalance starts or goes on
	brokers []string
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *hooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	h.mu.Lock()
	h.last = fmt.Errorf("%s: %w", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), err)
	h.mu.Unlock()
}

// OnBrokerWrite implements kgo.HookBrokerWrite: it notes the member's
// JoinGroup requests, which start its part in a rebalance.
func (h *hooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key == int16(kmsg.JoinGroup) && h.joining != nil {
		h.joining()
	}
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (h *hooks) OnGroupManageError(err error) {
	if h.manage != nil {
		h.manage(err)
	}
}

func (h *hooks) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// partitions asks the brokers how many partitions topic has, retrying
// unreachable brokers within timeout. It fails naming the brokers when
// none answers and naming the topic when it does not exist.
func partitions(ctx context.Context, cl *kgo.Client, h *hooks, topic string, timeout time.Duration) (int32, error) {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var md kadm.Metadata
	var err error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		md, err = kadm.NewClient(cl).Metadata(tctx, topic)
		if err == nil || !isDialErr(err) {
			break
		}
		select {
		case <-tctx.Done():
		case <-time.After(wait):
			continue
		}
		break
	}
	brokers := strings.Join(h.brokers, ",")
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case tctx.Err() != nil || isDialErr(err):
			msg := fmt.Sprintf("group: no answer from brokers %s within %v", brokers, timeout)
			if last := h.lastErr(); last != nil && !isDialErr(err) {
				return 0, fmt.Errorf("%s; last connection error: %w", msg, last)
			}
			return 0, fmt.Errorf("%s: %w", msg, err)
		}
		return 0, fmt.Errorf("group: metadata of topic %q from brokers %s: %w", topic, brokers, err)
	}
	td, ok := md.Topics[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return 0, fmt.Errorf("group: topic %q does not exist (brokers %s): %w; create it before the job's processes start", topic, brokers, kerr.UnknownTopicOrPartition)
	case td.Err != nil:
		return 0, fmt.Errorf("group: topic %q (brokers %s): %w", topic, brokers, td.Err)
	case len(td.Partitions) == 0:
		return 0, fmt.Errorf("group: topic %q (brokers %s) has no partitions", topic, brokers)
	}
	return int32(len(td.Partitions)), nil
}

// isDialErr reports whether err is a failure to connect.
func isDialErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || strings.Contains(err.Error(), "unable to dial")
}
