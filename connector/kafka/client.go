package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dialTracker remembers the last connection error of a client, so that a
// timeout can say why the brokers were unreachable.
type dialTracker struct {
	mu   sync.Mutex
	last error
	addr string
}

func (d *dialTracker) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	d.last, d.addr = err, net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port))
	d.mu.Unlock()
}

func (d *dialTracker) lastErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// newClient returns a franz-go client for c, with extra options last.
func newClient(c *common, extra ...kgo.Opt) (*kgo.Client, *dialTracker, error) {
	if len(c.brokers) == 0 {
		return nil, nil, errors.New("kafka: no brokers configured (kafka.Brokers)")
	}
	d := &dialTracker{}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.DialTimeout(min(c.connectTimeout, 10*time.Second)),
		kgo.WithHooks(d),
	}
	opts = append(opts, c.clientOpts...)
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: client for %s: %w", strings.Join(c.brokers, ","), err)
	}
	return cl, d, nil
}

// topicInfo is what metadata says about a topic.
type topicInfo struct {
	partitions int32
	id         [16]byte
}

// describeTopics asks the brokers about topics within the connect timeout.
// It fails clearly when no broker answers, when a topic does not exist, and
// when the client may not see a topic.
func describeTopics(ctx context.Context, c *common, cl *kgo.Client, d *dialTracker, topics ...string) (map[string]topicInfo, error) {
	tctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	var md kadm.Metadata
	var err error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		md, err = kadm.NewClient(cl).Metadata(tctx, topics...)
		if err == nil || !isDialErr(err) {
			break
		}
		// Brokers that are not up yet: retry within the connect timeout.
		select {
		case <-tctx.Done():
		case <-time.After(wait):
			continue
		}
		break
	}
	if err != nil {
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			return nil, resourceErr(err, "topic "+quoteAll(topics))
		}
		return nil, brokerErr(ctx, tctx, c, d, err)
	}
	out := make(map[string]topicInfo, len(topics))
	for _, t := range topics {
		td, ok := md.Topics[t]
		switch {
		case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			return nil, fmt.Errorf("kafka: topic %q does not exist (brokers %s): %w", t, strings.Join(c.brokers, ","), kerr.UnknownTopicOrPartition)
		case td.Err != nil:
			return nil, resourceErr(td.Err, fmt.Sprintf("topic %q", t))
		}
		out[t] = topicInfo{partitions: int32(len(td.Partitions)), id: [16]byte(td.ID)}
	}
	return out, nil
}

// PartitionCount returns how many partitions topic has, asking the
// brokers that opts name (Brokers; ConnectTimeout and ClientOpts apply).
// It fails naming the brokers when none answers within the connect
// timeout, and naming the topic when it does not exist or has no
// partitions.
func PartitionCount(ctx context.Context, topic string, opts ...Opt) (int32, error) {
	var sc sourceConfig
	sc.common = defaultCommon()
	for _, o := range opts {
		o.applySource(&sc)
	}
	cl, d, err := newClient(&sc.common)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	info, err := describeTopics(ctx, &sc.common, cl, d, topic)
	if err != nil {
		return 0, err
	}
	if n := info[topic].partitions; n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("kafka: topic %q (brokers %s) has no partitions", topic, strings.Join(sc.brokers, ","))
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// isDialErr reports whether err is a failure to connect.
func isDialErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || strings.Contains(err.Error(), "unable to dial")
}

// brokerErr explains an error of a request made within the connect timeout.
func brokerErr(parent, tctx context.Context, c *common, d *dialTracker, err error) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	if tctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || isDialErr(err) {
		msg := fmt.Sprintf("kafka: no answer from brokers %s within %v", strings.Join(c.brokers, ","), c.connectTimeout)
		if last := d.lastErr(); last != nil && !isDialErr(err) {
			return fmt.Errorf("%s; last connection error: %w", msg, last)
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("kafka: brokers %s closed the connection: %w (a broker that requires SASL or TLS does this when the handshake or the credentials are wrong: check kafka.ClientOpts)", strings.Join(c.brokers, ","), err)
	}
	return resourceErr(err, "brokers "+strings.Join(c.brokers, ","))
}

// resourceErr adds advice to authentication and authorization errors.
func resourceErr(err error, resource string) error {
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return fmt.Errorf("kafka: not authorized to use %s: %w (check the ACLs of the client's principal)", resource, err)
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState),
		errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("kafka: authentication failed for %s: %w (check the SASL mechanism, user and password)", resource, err)
	}
	return fmt.Errorf("kafka: %s: %w", resource, err)
}

// EnsureTopics creates the topics that do not exist yet, with partitions
// partitions and the brokers' default replication factor. Existing topics are
// left as they are.
func EnsureTopics(ctx context.Context, brokers []string, partitions int32, topics ...string) error {
	c := defaultCommon()
	c.brokers = brokers
	cl, d, err := newClient(&c)
	if err != nil {
		return err
	}
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(tctx, partitions, -1, nil, topics...)
	if err != nil {
		return brokerErr(ctx, tctx, &c, d, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return resourceErr(r.Err, fmt.Sprintf("creating topic %q", r.Topic))
		}
	}
	return nil
}
