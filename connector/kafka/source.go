package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source returns a source that reads records from Kafka topics and decodes
// their values into T. Topics is required. See the package documentation for
// splits, positions and start offsets.
//
// The source keeps one franz-go client per run attempt of the job, shared by
// its splits: a background loop polls records into a buffer per partition,
// and each split's reader takes records from its buffer without blocking.
// While a buffer holds BufferRecords records the loop stops polling (and the
// client stops fetching), which is the source's backpressure. A Source value
// must not be used by two jobs at the same time.
//
// Source panics when no topic is given or when WithDecoder's type is not T.
func Source[T any](opts ...SourceOpt) connector.Source[T] {
	cfg := sourceConfig{common: defaultCommon(), maxPartitions: 64, metadataEvery: 5 * time.Second, bufferRecords: 4096}
	for _, o := range opts {
		o.applySource(&cfg)
	}
	if len(cfg.topics) == 0 {
		panic("kafka.Source: no topics; use kafka.Topics")
	}
	dec, ok := typed[Decoder[T]](cfg.decoder, "WithDecoder", "source")
	if !ok {
		dec = Values[T]()
	}
	name := cfg.name
	if name == "" {
		name = "kafka:" + strings.Join(cfg.topics, ",")
	}
	return &source[T]{cfg: cfg, decode: dec, name: name}
}

type source[T any] struct {
	cfg    sourceConfig
	decode Decoder[T]
	name   string

	mu   sync.Mutex
	sess *session
}

func (s *source[T]) Name() string { return s.name }

func (s *source[T]) Splits() int {
	if s.cfg.partitions != nil {
		return len(s.cfg.topics) * len(s.cfg.partitions)
	}
	return len(s.cfg.topics) * s.cfg.maxPartitions
}

// topicPartition names one partition.
type topicPartition struct {
	topic string
	part  int32
}

func (t topicPartition) String() string { return fmt.Sprintf("topic %q partition %d", t.topic, t.part) }

func (s *source[T]) OpenSplit(ctx context.Context, split int, pos []byte) (connector.SplitReader[T], error) {
	if split < 0 || split >= s.Splits() {
		return nil, fmt.Errorf("kafka source: split %d out of range [0, %d)", split, s.Splits())
	}
	tp := topicPartition{topic: s.cfg.topics[split%len(s.cfg.topics)], part: int32(split / len(s.cfg.topics))}
	if s.cfg.partitions != nil {
		tp.part = s.cfg.partitions[split/len(s.cfg.topics)]
	}
	st, err := decodePosition(pos)
	if err != nil {
		return nil, fmt.Errorf("kafka source: %s: %w", tp, err)
	}
	sess, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r := &reader[T]{sess: sess, tp: tp, pos: st, decode: s.decode}
	if err := sess.open(ctx, r.tp, &r.pos, pos == nil); err != nil {
		s.release(sess)
		return nil, err
	}
	r.p = sess.partition(tp)
	r.dead = sess.deadLetter()
	r.onClose = func() { s.release(sess) }
	return r, nil
}

// acquire returns the running session, creating it for the first split.
func (s *source[T]) acquire(ctx context.Context) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil && s.sess.owner.Err() != nil {
		// A session of an ended run attempt whose readers were not all
		// closed: it is closing (see newSession); start afresh.
		s.sess = nil
	}
	if s.sess == nil {
		sess, err := newSession(ctx, &s.cfg)
		if err != nil {
			return nil, err
		}
		s.sess = sess
		// The session ends with the run attempt that opened it, even if a
		// reader is never closed.
		context.AfterFunc(ctx, func() {
			s.mu.Lock()
			if s.sess == sess {
				s.sess = nil
			}
			s.mu.Unlock()
			sess.close()
		})
	}
	s.sess.refs++
	return s.sess, nil
}

func (s *source[T]) release(sess *session) {
	s.mu.Lock()
	sess.refs--
	last := sess.refs == 0
	if last && s.sess == sess {
		s.sess = nil
	}
	s.mu.Unlock()
	if last {
		sess.close()
	}
}

// position is a split's place in its partition.
type position struct {
	next      int64 // the next offset to read, unless fromStart
	fromStart bool  // the partition did not exist: read it from its first offset
	bounded   bool
	end       int64 // with bounded: stop before this offset
}

const posVersion = 1

func (p position) encode() []byte {
	b := []byte{posVersion, 0}
	if p.fromStart {
		b[1] |= 1
	} else {
		b = binary.AppendUvarint(b, uint64(p.next))
	}
	if p.bounded {
		b[1] |= 2
		b = binary.AppendUvarint(b, uint64(p.end))
	}
	return b
}

func decodePosition(b []byte) (position, error) {
	var p position
	if b == nil {
		return p, nil
	}
	if len(b) < 2 || b[0] != posVersion || b[1]&^3 != 0 {
		return p, fmt.Errorf("invalid position %x", b)
	}
	p.fromStart, p.bounded = b[1]&1 != 0, b[1]&2 != 0
	rest := b[2:]
	read := func(dst *int64) bool {
		v, n := binary.Uvarint(rest)
		if n <= 0 || v > 1<<62 {
			return false
		}
		*dst, rest = int64(v), rest[n:]
		return true
	}
	if (!p.fromStart && !read(&p.next)) || (p.bounded && !read(&p.end)) || len(rest) != 0 {
		return p, fmt.Errorf("invalid position %x", b)
	}
	return p, nil
}

// partition is the buffer of one consumed partition, filled by the session's
// poll loop and drained by the split's reader.
type partition struct {
	mu        sync.Mutex
	queue     []*kgo.Record
	head      int
	err       error
	full      bool         // the poll loop waits for this buffer to drain
	done      bool         // a bounded split reached its end: drop what comes
	consuming bool         // added to the client
	start     kgo.Offset   // where consuming starts once the partition exists
	waiting   bool         // the partition does not exist yet
	hwm       atomic.Int64 // the high watermark the last fetch saw; -1 before one
}

// session is one job's use of a source: a consumer client and its loops.
type session struct {
	cfg    *sourceConfig
	cl     *kgo.Client
	adm    *kadm.Client
	dial   *dialTracker
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	refs   int // guarded by the source's mu

	mu      sync.Mutex
	parts   map[topicPartition]*partition
	counts  map[string]int32
	fatal   error
	offsets map[string]kadm.ListedOffsets // cached offset lists, by kind and topic
	groupAt map[string]kadm.OffsetResponses
	commits map[topicPartition]int64 // for CommitGroup
	dirty   bool

	drained chan struct{} // a full buffer drained

	owner     context.Context // the context of the first OpenSplit: the run attempt's
	closeOnce sync.Once

	dlqOnce sync.Once
	dlq     *kgo.Client
	dlqErr  error
}

func newSession(ctx context.Context, cfg *sourceConfig) (*session, error) {
	cl, dial, err := newClient(&cfg.common,
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		// New partitions are added as they appear: let the client load
		// their metadata about as soon as the source notices them.
		kgo.MetadataMinAge(max(min(cfg.metadataEvery, 5*time.Second), 100*time.Millisecond)),
	)
	if err != nil {
		return nil, err
	}
	topics := append([]string(nil), cfg.topics...)
	if cfg.deadTopic != "" {
		topics = append(topics, cfg.deadTopic)
	}
	info, err := describeTopics(ctx, &cfg.common, cl, dial, topics...)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &session{owner: ctx, cfg: cfg, cl: cl, adm: kadm.NewClient(cl), dial: dial, ctx: sctx, cancel: cancel,
		parts: map[topicPartition]*partition{}, counts: map[string]int32{}, offsets: map[string]kadm.ListedOffsets{},
		groupAt: map[string]kadm.OffsetResponses{}, commits: map[topicPartition]int64{}, drained: make(chan struct{}, 1)}
	if err := s.setCounts(info); err != nil {
		s.close()
		return nil, err
	}
	s.wg.Add(2)
	go s.poll()
	go s.watch()
	if cfg.commitGroup != "" {
		s.wg.Add(1)
		go s.commitLoop()
	}
	return s, nil
}

// setCounts records the topics' partition counts and starts consuming
// partitions that appeared.
func (s *session) setCounts(info map[string]topicInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	add := map[string]map[int32]kgo.Offset{}
	for _, t := range s.cfg.topics {
		n := info[t].partitions
		if s.cfg.partitions == nil && int(n) > s.cfg.maxPartitions {
			s.fatal = fmt.Errorf("kafka source: topic %q has %d partitions, more than MaxPartitions(%d) splits per topic; raise kafka.MaxPartitions and restart the job", t, n, s.cfg.maxPartitions)
			return s.fatal
		}
		s.counts[t] = n
	}
	for tp, p := range s.parts {
		p.mu.Lock()
		if p.waiting && tp.part < s.counts[tp.topic] {
			p.waiting, p.consuming = false, true
			if add[tp.topic] == nil {
				add[tp.topic] = map[int32]kgo.Offset{}
			}
			add[tp.topic][tp.part] = p.start
		}
		p.mu.Unlock()
	}
	if len(add) > 0 {
		s.cl.AddConsumePartitions(add)
	}
	return nil
}

// open registers a split's partition and settles its position: for a split
// without a checkpointed position (fresh), the configured start, resolved
// to an offset now.
func (s *session) open(ctx context.Context, tp topicPartition, pos *position, fresh bool) error {
	s.mu.Lock()
	if s.parts[tp] != nil {
		s.mu.Unlock()
		return fmt.Errorf("kafka source: %s is already being read (is the source used by two jobs at once?)", tp)
	}
	exists := tp.part < s.counts[tp.topic]
	s.mu.Unlock()
	if fresh {
		*pos = position{bounded: s.cfg.bounded}
		switch {
		case !exists && s.cfg.bounded:
			// Bounded to what exists now: nothing.
		case !exists:
			pos.fromStart = true
		default:
			next, err := s.startOffset(ctx, tp)
			if err != nil {
				return err
			}
			pos.next = next
			if s.cfg.bounded {
				end, err := s.listed(ctx, "committed", tp)
				if err != nil {
					return err
				}
				pos.end = end
				pos.next = min(pos.next, end)
			}
		}
	}
	p := &partition{}
	p.hwm.Store(-1)
	if exists && !(pos.bounded && !pos.fromStart && pos.next >= pos.end) {
		// The lag is known from the start: a partition read to its end
		// before (a restored position) gets no fetch, and so no high
		// watermark, until a record arrives. The offsets are listed once
		// per topic; failing, the first fetch tells.
		if end, err := s.listed(ctx, "committed", tp); err == nil {
			p.hwm.Store(end)
		}
	}
	if pos.fromStart {
		p.start = kgo.NewOffset().AtStart()
	} else {
		p.start = kgo.NewOffset().At(pos.next)
	}
	done := pos.bounded && !pos.fromStart && pos.next >= pos.end
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts[tp] = p
	switch {
	case done:
	case tp.part < s.counts[tp.topic]:
		p.consuming = true
		s.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{tp.topic: {tp.part: p.start}})
	default:
		p.waiting = true
	}
	return nil
}

// startOffset resolves the configured start for a partition that exists.
func (s *session) startOffset(ctx context.Context, tp topicPartition) (int64, error) {
	switch s.cfg.start {
	case startLatest:
		return s.listed(ctx, "committed", tp)
	case startAt:
		return s.listed(ctx, "at", tp)
	case startCommitted:
		s.mu.Lock()
		resp, ok := s.groupAt[tp.topic]
		s.mu.Unlock()
		if !ok {
			var err error
			resp, err = s.adm.FetchOffsetsForTopics(ctx, s.cfg.startGroup, tp.topic)
			if errors.Is(err, kerr.GroupIDNotFound) {
				resp, err = kadm.OffsetResponses{}, nil
			}
			if err != nil {
				return 0, resourceErr(err, fmt.Sprintf("offsets of group %q", s.cfg.startGroup))
			}
			s.mu.Lock()
			s.groupAt[tp.topic] = resp
			s.mu.Unlock()
		}
		if o, ok := resp.Lookup(tp.topic, tp.part); ok && o.Err == nil && o.At >= 0 {
			return o.At, nil
		}
	}
	return s.listed(ctx, "start", tp)
}

// listed returns one partition's offset of a kind: "start" (log start),
// "committed" (last stable offset) or "at" (first at the StartAt time, or
// the last stable offset when there is none). Lists are fetched once per
// topic and session.
func (s *session) listed(ctx context.Context, kind string, tp topicPartition) (int64, error) {
	key := kind + "\x00" + tp.topic
	s.mu.Lock()
	lo, ok := s.offsets[key]
	s.mu.Unlock()
	if !ok {
		var err error
		switch kind {
		case "start":
			lo, err = s.adm.ListStartOffsets(ctx, tp.topic)
		case "committed":
			lo, err = s.adm.ListCommittedOffsets(ctx, tp.topic)
		case "at":
			lo, err = s.adm.ListOffsetsAfterMilli(ctx, s.cfg.startAt.UnixMilli(), tp.topic)
		}
		if err != nil {
			return 0, fmt.Errorf("kafka source: listing offsets of %s: %w", tp, resourceErr(err, fmt.Sprintf("topic %q", tp.topic)))
		}
		s.mu.Lock()
		s.offsets[key] = lo
		s.mu.Unlock()
	}
	o, ok := lo.Lookup(tp.topic, tp.part)
	if !ok {
		return 0, fmt.Errorf("kafka source: no %s offset listed for %s", kind, tp)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("kafka source: listing offsets of %s: %w", tp, resourceErr(o.Err, fmt.Sprintf("topic %q", tp.topic)))
	}
	if kind == "at" && o.Timestamp < 0 {
		return s.listed(ctx, "committed", tp)
	}
	return o.Offset, nil
}

func (s *session) partition(tp topicPartition) *partition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[tp]
}

// remove stops consuming a partition.
func (s *session) remove(tp topicPartition) {
	s.mu.Lock()
	p := s.parts[tp]
	delete(s.parts, tp)
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	consuming := p.consuming
	p.consuming = false
	p.mu.Unlock()
	if consuming {
		s.cl.RemoveConsumePartitions(map[string][]int32{tp.topic: {tp.part}})
	}
}

// poll fetches records into the partitions' buffers.
func (s *session) poll() {
	defer s.wg.Done()
	limit := s.cfg.bufferRecords
	for {
		fs := s.cl.PollRecords(s.ctx, limit)
		if s.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, part int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			var loss *kgo.ErrDataLoss
			if errors.As(err, &loss) {
				return // informational: the client resets and goes on
			}
			err = resourceErr(err, topicPartition{topic, part}.String())
			s.mu.Lock()
			for tp, p := range s.parts {
				if tp.topic == topic && (part < 0 || tp.part == part) {
					p.mu.Lock()
					if p.err == nil {
						p.err = err
					}
					p.mu.Unlock()
				}
			}
			s.mu.Unlock()
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			s.mu.Lock()
			p := s.parts[topicPartition{fp.Topic, fp.Partition}]
			s.mu.Unlock()
			if p == nil {
				return // closed meanwhile
			}
			if fp.Err == nil {
				p.hwm.Store(fp.HighWatermark)
			}
			if len(fp.Records) == 0 {
				return
			}
			p.mu.Lock()
			if !p.done {
				p.queue = append(p.queue, fp.Records...)
			}
			p.mu.Unlock()
		})
		// Backpressure: while a buffer is full, stop polling. The client
		// then stops fetching once it holds one fetch per broker.
		for s.full(limit) {
			select {
			case <-s.ctx.Done():
				return
			case <-s.drained:
			}
		}
	}
}

// full reports whether some partition buffer holds limit records or more,
// and marks those buffers so that their readers signal when they drain.
func (s *session) full(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	over := false
	for _, p := range s.parts {
		p.mu.Lock()
		if len(p.queue)-p.head >= limit {
			p.full, over = true, true
		}
		p.mu.Unlock()
	}
	return over
}

// watch refreshes metadata to find new partitions.
func (s *session) watch() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.metadataEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		info, err := describeTopics(s.ctx, &s.cfg.common, s.cl, s.dial, s.cfg.topics...)
		if err != nil {
			continue // transient; reading goes on, errors surface in fetches
		}
		_ = s.setCounts(info)
	}
}

// commitLoop commits checkpointed positions to the CommitGroup group.
func (s *session) commitLoop() {
	defer s.wg.Done()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.commitPositions(s.ctx)
	}
}

func (s *session) commitPositions(ctx context.Context) {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return
	}
	var os kadm.Offsets
	for tp, at := range s.commits {
		os.Add(kadm.Offset{Topic: tp.topic, Partition: tp.part, At: at, LeaderEpoch: -1})
	}
	s.dirty = false
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = s.adm.CommitOffsets(cctx, s.cfg.commitGroup, os) // monitoring only
}

func (s *session) notePosition(tp topicPartition, next int64) {
	if s.cfg.commitGroup == "" {
		return
	}
	s.mu.Lock()
	if old, ok := s.commits[tp]; !ok || old != next {
		s.commits[tp], s.dirty = next, true
	}
	s.mu.Unlock()
}

func (s *session) close() { s.closeOnce.Do(s.doClose) }

func (s *session) doClose() {
	s.cancel()
	s.wg.Wait()
	if s.cfg.commitGroup != "" {
		s.commitPositions(context.Background())
	}
	s.cl.Close()
	if s.dlq != nil {
		s.dlq.Close()
	}
}

// deadLetter returns the configured handler of undecodable records, or nil.
func (s *session) deadLetter() func(*kgo.Record, error) error {
	if s.cfg.deadLetter != nil {
		return s.cfg.deadLetter
	}
	if s.cfg.deadTopic == "" {
		return nil
	}
	return func(rec *kgo.Record, cause error) error {
		s.dlqOnce.Do(func() {
			s.dlq, _, s.dlqErr = newClient(&s.cfg.common)
		})
		if s.dlqErr != nil {
			return s.dlqErr
		}
		out := &kgo.Record{Topic: s.cfg.deadTopic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
		out.Headers = append(append(out.Headers, rec.Headers...),
			kgo.RecordHeader{Key: "eddy-error", Value: []byte(cause.Error())},
			kgo.RecordHeader{Key: "eddy-source", Value: fmt.Appendf(nil, "%s/%d/%d", rec.Topic, rec.Partition, rec.Offset)})
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		if err := s.dlq.ProduceSync(ctx, out).FirstErr(); err != nil {
			return fmt.Errorf("kafka source: routing an undecodable record to dead-letter topic %q: %w (the record: %w)", s.cfg.deadTopic, resourceErr(err, fmt.Sprintf("topic %q", s.cfg.deadTopic)), cause)
		}
		return nil
	}
}

// reader reads one split: one partition.
type reader[T any] struct {
	sess    *session
	tp      topicPartition
	p       *partition
	pos     position
	decode  Decoder[T]
	dead    func(*kgo.Record, error) error
	onClose func() // releases the session
	closed  bool
}

func (r *reader[T]) Next(rec *T) (connector.ReadStatus, error) {
	p := r.p
	for {
		if r.pos.bounded && (r.pos.fromStart || r.pos.next >= r.pos.end) {
			// The end; fromStart: a partition that did not exist when the
			// bounded job started.
			r.finish()
			return connector.End, nil
		}
		p.mu.Lock()
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return connector.End, err
		}
		if p.head == len(p.queue) {
			p.mu.Unlock()
			r.sess.mu.Lock()
			err := r.sess.fatal
			r.sess.mu.Unlock()
			if err != nil {
				return connector.End, err
			}
			return connector.Idle, nil
		}
		kr := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		left := len(p.queue) - p.head
		if left == 0 {
			p.queue, p.head = p.queue[:0], 0
		} else if p.head > 1024 && p.head > left {
			n := copy(p.queue, p.queue[p.head:])
			clear(p.queue[n:])
			p.queue, p.head = p.queue[:n], 0
		}
		signal := p.full && left <= r.sess.cfg.bufferRecords/2
		if signal {
			p.full = false
		}
		p.mu.Unlock()
		if signal {
			select {
			case r.sess.drained <- struct{}{}:
			default:
			}
		}
		if !r.pos.fromStart && kr.Offset < r.pos.next {
			continue // already read
		}
		if r.pos.bounded && kr.Offset >= r.pos.end {
			r.pos.next = r.pos.end
			continue // ends above
		}
		r.pos.next, r.pos.fromStart = kr.Offset+1, false
		if kr.Attrs.IsControl() {
			continue
		}
		if err := r.decode(kr, rec); err != nil {
			err = fmt.Errorf("kafka source: topic %q partition %d offset %d: cannot decode the value (%d bytes): %w",
				kr.Topic, kr.Partition, kr.Offset, len(kr.Value), err)
			if r.dead == nil {
				return connector.End, err
			}
			if derr := r.dead(kr, err); derr != nil {
				return connector.End, derr
			}
			continue
		}
		return connector.Record, nil
	}
}

// finish stops fetching a bounded split's partition once it has ended, so
// that records after the end do not fill its buffer.
func (r *reader[T]) finish() {
	p := r.p
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return
	}
	p.done, p.full = true, false
	p.queue, p.head = nil, 0
	consuming := p.consuming
	p.consuming = false
	p.mu.Unlock()
	if consuming {
		r.sess.cl.RemoveConsumePartitions(map[string][]int32{r.tp.topic: {r.tp.part}})
	}
	select {
	case r.sess.drained <- struct{}{}:
	default:
	}
}

// Lag is the partition's high watermark, as the last fetch saw it, minus
// the next offset to read (at most the end of a bounded split).
func (r *reader[T]) Lag() (int64, bool) {
	hwm := r.p.hwm.Load()
	if hwm < 0 {
		return 0, false
	}
	if r.pos.bounded {
		hwm = min(hwm, r.pos.end)
	}
	if r.pos.fromStart {
		return max(hwm, 0), true
	}
	return max(hwm-r.pos.next, 0), true
}

func (r *reader[T]) Position() []byte {
	if !r.pos.fromStart {
		r.sess.notePosition(r.tp, r.pos.next)
	}
	return r.pos.encode()
}

func (r *reader[T]) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.sess.remove(r.tp)
	r.onClose() // the last reader closes the session
	return nil
}
