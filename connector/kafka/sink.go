package kafka

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eddyflow/eddy/connector"
	"github.com/eddyflow/eddy/serde"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sink returns a sink that writes records to topic, values encoded with
// ProtoEncoder unless WithEncoder says otherwise, keys from Key. The
// default guarantee is ExactlyOnce; see the package documentation for how it
// works and what it costs.
//
// Sink panics when Key's or WithEncoder's type is not T.
func Sink[T any](topic string, opts ...SinkOpt) connector.Sink[T] {
	cfg := sinkConfig{common: defaultCommon(), maxBuffered: 64 << 20, txnTimeout: time.Minute}
	for _, o := range opts {
		o.applySink(&cfg)
	}
	if cfg.name == "" {
		cfg.name = topic
	}
	s := &sink[T]{cfg: cfg, topic: topic}
	s.key, _ = typed[func(*T) []byte](cfg.key, "Key", "sink")
	var ok bool
	if s.enc, ok = typed[Encoder[T]](cfg.encoder, "WithEncoder", "sink"); !ok {
		s.enc = ProtoEncoder[T]()
	}
	if cfg.schemaHeader {
		if sc, err := serde.SchemaOf[T](); err == nil {
			s.fp = sc.Fingerprint()
		} else {
			s.fpErr = err
		}
	}
	return s
}

type sink[T any] struct {
	cfg   sinkConfig
	topic string
	key   func(*T) []byte
	enc   Encoder[T]
	fp    string // the SchemaHeader value, or ""
	fpErr error

	mu  sync.Mutex
	run *sinkRun // the current attempt's
}

func (s *sink[T]) Name() string { return "kafka:" + s.cfg.name }

func (s *sink[T]) txnID(subtask int) string { return fmt.Sprintf("eddy-%s-%d", s.cfg.name, subtask) }

// sinkRun is the sink's state during one run attempt of a job: its lineage
// and transactional producers, closed when the attempt ends.
type sinkRun struct {
	lineage [16]byte
	topicID [16]byte
	mu      sync.Mutex
	prods   map[int]*txnProducer
	closed  bool
}

func (r *sinkRun) close() {
	r.mu.Lock()
	r.closed = true
	prods := r.prods
	r.prods = nil
	r.mu.Unlock()
	for _, p := range prods {
		p.close()
	}
}

// close closes the producer's client; a client that replaces it later is
// closed at once.
func (p *txnProducer) close() {
	p.clMu.Lock()
	p.closed = true
	cl := p.cl
	p.clMu.Unlock()
	cl.Close()
}

// replaceClient swaps the client for a fresh one, with a new producer
// epoch: after franz-go turned a commit into an abort its sequence state
// for the partitions is not to be trusted (the next produce failed with
// OUT_OF_ORDER_SEQUENCE_NUMBER). Called with mu held.
func (p *txnProducer) replaceClient(ctx context.Context) error {
	nc, err := p.reopen(ctx)
	if err != nil {
		return err
	}
	p.clMu.Lock()
	old, closed := p.cl, p.closed
	if !closed {
		p.cl = nc
	}
	p.clMu.Unlock()
	if closed {
		nc.Close()
		return fmt.Errorf("the job attempt has ended: %w", context.Canceled)
	}
	old.Close()
	p.recs = nil
	return nil
}

// Recover checks the topic, then (ExactlyOnce) takes the lineage of the
// restored handles, fences the transactional ids of the subtasks they name,
// and commits the handles whose markers are missing.
func (s *sink[T]) Recover(ctx context.Context, committed [][]byte) error {
	if s.fpErr != nil {
		return fmt.Errorf("kafka sink %s: SchemaHeader: %w", s.cfg.name, s.fpErr)
	}
	cl, dial, err := newClient(&s.cfg.common)
	if err != nil {
		return err
	}
	info, err := describeTopics(ctx, &s.cfg.common, cl, dial, s.topic)
	cl.Close()
	if err != nil {
		return fmt.Errorf("kafka sink %s: %w", s.cfg.name, err)
	}
	if s.cfg.guarantee != ExactlyOnce {
		return nil
	}
	handles := make([]handle, 0, len(committed))
	for _, b := range committed {
		if len(b) == 0 {
			continue
		}
		h, err := parseHandle(b)
		if err != nil {
			return fmt.Errorf("kafka sink %s: recover: %w", s.cfg.name, err)
		}
		handles = append(handles, h)
	}
	run := &sinkRun{prods: map[int]*txnProducer{}, topicID: info[s.topic].id}
	if len(handles) > 0 {
		run.lineage = handles[0].lineage
	} else if _, err := rand.Read(run.lineage[:]); err != nil {
		return fmt.Errorf("kafka sink %s: lineage: %w", s.cfg.name, err)
	}
	s.mu.Lock()
	old := s.run
	s.run = run
	s.mu.Unlock()
	if old != nil {
		old.close()
	}
	context.AfterFunc(ctx, run.close)
	// Fence every subtask the restored handles speak of, so that no
	// transaction of a killed process stays open.
	parallelism := 0
	for _, h := range handles {
		parallelism = max(parallelism, int(h.parallelism))
	}
	for sub := range parallelism {
		if _, err := s.producer(ctx, run, sub); err != nil {
			return err
		}
	}
	return s.commit(ctx, run, handles)
}

// currentRun returns the attempt's state; a sink used without Recover gets
// a fresh lineage.
func (s *sink[T]) currentRun() *sinkRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		s.run = &sinkRun{prods: map[int]*txnProducer{}}
		_, _ = rand.Read(s.run.lineage[:])
	}
	return s.run
}

func (s *sink[T]) OpenWriter(ctx context.Context, subtask, parallelism int) (connector.SinkWriter[T], error) {
	if subtask < 0 || subtask >= parallelism {
		return nil, fmt.Errorf("kafka sink %s: subtask %d of %d", s.cfg.name, subtask, parallelism)
	}
	if s.cfg.guarantee != ExactlyOnce {
		return s.openDirect(ctx)
	}
	run := s.currentRun()
	// Initialising the subtask's transactional producer fences older
	// producers with its id and aborts what they left open.
	if _, err := s.producer(ctx, run, subtask); err != nil {
		return nil, err
	}
	w := &txnWriter[T]{s: s, subtask: subtask, parallelism: parallelism, lineage: run.lineage}
	return w, nil
}

func (s *sink[T]) Commit(ctx context.Context, txns [][]byte) error {
	if s.cfg.guarantee != ExactlyOnce {
		return nil
	}
	handles := make([]handle, 0, len(txns))
	for _, b := range txns {
		if len(b) == 0 {
			continue
		}
		h, err := parseHandle(b)
		if err != nil {
			return fmt.Errorf("kafka sink %s: commit: %w", s.cfg.name, err)
		}
		handles = append(handles, h)
	}
	return s.commit(ctx, s.currentRun(), handles)
}

// commit commits handles, each subtask's in checkpoint order, subtasks in
// parallel.
func (s *sink[T]) commit(ctx context.Context, run *sinkRun, handles []handle) error {
	if len(handles) == 0 {
		return nil
	}
	bySub := map[int][]handle{}
	for _, h := range handles {
		bySub[int(h.subtask)] = append(bySub[int(h.subtask)], h)
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(bySub))
	var mu sync.Mutex
	for sub, hs := range bySub {
		slices.SortFunc(hs, func(a, b handle) int { return cmpUint(a.checkpoint, b.checkpoint) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.producer(ctx, run, sub)
			run.mu.Lock()
			topicID := run.topicID
			run.mu.Unlock()
			for i := 0; err == nil && i < len(hs); i++ {
				err = p.commit(ctx, s.cfg.name, s.topic, topicID, hs[i])
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// txnProducer is the transactional producer of one subtask, and the last
// marker it knows.
type txnProducer struct {
	mu sync.Mutex
	// cl is read under mu by commits; replaced under mu and clMu; read
	// under clMu by close.
	cl     *kgo.Client
	clMu   sync.Mutex
	closed bool // guarded by clMu
	// reopen creates a fresh client for the transactional id and
	// initialises its producer id (fencing the current one).
	reopen func(context.Context) (*kgo.Client, error)
	txnID  string
	group  string
	marker handleMark
	err    error        // fatal: fenced
	recs   []kgo.Record // reused by commits: the client holds none after Flush
}

// handleMark is what the marker group's offset says: the last committed
// checkpoint of a lineage.
type handleMark struct {
	lineage    [16]byte
	checkpoint uint64
	set        bool
}

// producer returns the subtask's transactional producer, creating it:
// initialising its producer id (which fences and aborts) and reading its
// marker.
func (s *sink[T]) producer(ctx context.Context, run *sinkRun, subtask int) (*txnProducer, error) {
	run.mu.Lock()
	if run.closed {
		run.mu.Unlock()
		return nil, fmt.Errorf("kafka sink %s: the job attempt has ended: %w", s.cfg.name, context.Canceled)
	}
	if p := run.prods[subtask]; p != nil {
		run.mu.Unlock()
		return p, nil
	}
	run.mu.Unlock()
	id := s.txnID(subtask)
	opts := []kgo.Opt{
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(s.cfg.txnTimeout),
		kgo.DefaultProduceTopic(s.topic),
		kgo.ProducerLinger(0),
	}
	cl, dial, err := newClient(&s.cfg.common, opts...)
	if err != nil {
		return nil, err
	}
	p := &txnProducer{cl: cl, txnID: id, group: id}
	p.reopen = func(ctx context.Context) (*kgo.Client, error) {
		cl, dial, err := newClient(&s.cfg.common, opts...)
		if err != nil {
			return nil, err
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout)
		defer cancel()
		if _, _, err := cl.ProducerID(tctx); err != nil {
			cl.Close()
			if (tctx.Err() != nil && ctx.Err() == nil) || isDialErr(err) {
				err = brokerErr(ctx, tctx, &s.cfg.common, dial, err)
			}
			return nil, fmt.Errorf("initialising transactional id %q again: %w", id, txnErr(err, id, s.cfg.name))
		}
		return cl, nil
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout)
	defer cancel()
	fail := func(err error) (*txnProducer, error) {
		cl.Close()
		return nil, fmt.Errorf("kafka sink %s: %w", s.cfg.name, err)
	}
	run.mu.Lock()
	needID := run.topicID == [16]byte{}
	run.mu.Unlock()
	if needID {
		info, err := describeTopics(tctx, &s.cfg.common, cl, dial, s.topic)
		if err != nil {
			return fail(err)
		}
		run.mu.Lock()
		run.topicID = info[s.topic].id
		run.mu.Unlock()
	}
	_, _, err = cl.ProducerID(tctx)
	if err == nil {
		err = p.readMarker(tctx, s.topic)
	}
	if err != nil {
		if (tctx.Err() != nil && ctx.Err() == nil) || isDialErr(err) {
			return fail(fmt.Errorf("initialising transactional id %q: %w", id, brokerErr(ctx, tctx, &s.cfg.common, dial, err)))
		}
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			return fail(txnErr(err, id, s.cfg.name))
		}
		return fail(fmt.Errorf("initialising transactional id %q: %w", id, txnErr(err, id, s.cfg.name)))
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.closed {
		cl.Close()
		return nil, fmt.Errorf("kafka sink %s: the job attempt has ended: %w", s.cfg.name, context.Canceled)
	}
	if old := run.prods[subtask]; old != nil { // created concurrently
		cl.Close()
		return old, nil
	}
	run.prods[subtask] = p
	return p, nil
}

// readMarker reads the last committed checkpoint from the marker group.
func (p *txnProducer) readMarker(ctx context.Context, topic string) error {
	resp, err := kadm.NewClient(p.cl).FetchOffsetsForTopics(kadm.RequireStable(ctx), p.group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		p.marker = handleMark{}
		return nil
	}
	if err != nil {
		return resourceErr(err, fmt.Sprintf("marker group %q", p.group))
	}
	o, ok := resp.Lookup(topic, 0)
	p.marker = handleMark{}
	if !ok || o.Err != nil || o.At < 0 {
		if ok && o.Err != nil && !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return resourceErr(o.Err, fmt.Sprintf("marker group %q", p.group))
		}
		return nil
	}
	lin, err := hex.DecodeString(o.Metadata)
	if err != nil || len(lin) != 16 {
		return nil // not ours: a marker of no lineage
	}
	p.marker = handleMark{lineage: [16]byte(lin), checkpoint: uint64(o.At), set: true}
	return nil
}

// commitAttempts bounds how often commit repeats a transaction that the
// broker aborted although the client reported it committed.
const commitAttempts = 3

// verifyTimeout bounds reading the marker back after a commit.
const verifyTimeout = 30 * time.Second

// commit produces a handle's records in one transaction together with its
// marker, unless the marker says it is committed already.
//
// A nil from EndTransaction is not taken as proof: franz-go (v1.22.3) can
// turn a commit into an abort and still return nil when it believes no
// produce succeeded in the transaction (seen under load, after a produce to
// a topic whose metadata was loading). So after every commit the marker is
// read back, with stable offsets required: the marker moves only with the
// transaction, so it says whether the records are visible. If they are not,
// the transaction is produced again; after commitAttempts the commit fails
// loudly rather than report records as committed that nobody can read.
func (p *txnProducer) commit(ctx context.Context, name, topic string, topicID [16]byte, h handle) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	for attempt := 1; ; attempt++ {
		if p.marker.set && p.marker.lineage == h.lineage && p.marker.checkpoint >= h.checkpoint {
			return nil // committed
		}
		if attempt > 1 {
			// Bounded: a marker offset left pending by a transaction the
			// broker still holds open would make a stable read wait.
			vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
			err := p.readMarker(vctx, topic)
			cancel()
			if err != nil {
				return fmt.Errorf("kafka sink %s: checking the commit of checkpoint %d: %w", name, h.checkpoint, err)
			}
			if p.marker.set && p.marker.lineage == h.lineage && p.marker.checkpoint >= h.checkpoint {
				return nil
			}
			if attempt <= commitAttempts {
				if err := p.replaceClient(ctx); err != nil {
					return fmt.Errorf("kafka sink %s: checkpoint %d: the broker aborted the transaction although the client reported it committed, and a fresh producer could not be made: %w", name, h.checkpoint, err)
				}
			}
			if attempt > commitAttempts {
				return fmt.Errorf("kafka sink %s: checkpoint %d: the transaction of transactional id %q was aborted by the broker %d times although the client reported it committed; none of its records are visible, so the checkpoint is not committed",
					name, h.checkpoint, p.txnID, commitAttempts)
			}
		}
		if err := p.produceTxn(ctx, name, topic, topicID, h); err != nil {
			return err
		}
		p.marker = handleMark{} // unknown until read back
	}
}

// produceTxn writes the handle's records and marker in one transaction and
// asks for its commit.
func (p *txnProducer) produceTxn(ctx context.Context, name, topic string, topicID [16]byte, h handle) error {
	fail := func(what string, err error) error {
		// Abort what was started; the producer stays usable unless fenced.
		// The client may still hold records: do not reuse them.
		p.recs = nil
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = p.cl.AbortBufferedRecords(actx)
		_ = p.cl.EndTransaction(actx, kgo.TryAbort)
		cancel()
		err = fmt.Errorf("kafka sink %s: %s of checkpoint %d: %w", name, what, h.checkpoint, txnErr(err, p.txnID, name))
		if isFenced(err) {
			p.err = err
		}
		return err
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return fail("begin transaction", err)
	}
	var first atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			first.CompareAndSwap(nil, &err)
		}
	}
	if uint64(cap(p.recs)) < h.count {
		p.recs = make([]kgo.Record, h.count)
	}
	recs := p.recs[:h.count]
	var hdr []kgo.RecordHeader
	if h.fp != "" {
		hdr = []kgo.RecordHeader{{Key: SchemaHeaderKey, Value: []byte(h.fp)}}
	}
	i := 0
	err := h.each(func(key, value []byte, ts int64) error {
		r := &recs[i]
		i++
		*r = kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(ts), Headers: hdr}
		p.cl.Produce(ctx, r, promise)
		return nil
	})
	if err != nil {
		return fail("produce", err)
	}
	if err := p.cl.Flush(ctx); err != nil {
		return fail("produce", err)
	}
	if e := first.Load(); e != nil {
		return fail("produce", *e)
	}
	if err := p.commitMarker(ctx, topic, topicID, h); err != nil {
		return fail("marker", err)
	}
	clear(recs) // no references to the handle's bytes
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fail("commit", err)
	}
	return nil
}

// commitMarker adds the marker group to the transaction and sets its offset
// on partition 0 of the topic to the handle's checkpoint.
func (p *txnProducer) commitMarker(ctx context.Context, topic string, topicID [16]byte, h handle) error {
	pid, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	err = retry(ctx, func() error {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.txnID, pid, epoch, p.group
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if err != nil {
		return fmt.Errorf("adding marker group %q to the transaction: %w", p.group, err)
	}
	meta := hex.EncodeToString(h.lineage[:])
	return retry(ctx, func() error {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = p.txnID, p.group, pid, epoch
		req.Generation, req.MemberID = -1, ""
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = 0, int64(h.checkpoint), -1, &meta
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, p.cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, pp := range t.Partitions {
				if err := kerr.ErrorForCode(pp.ErrorCode); err != nil {
					return fmt.Errorf("committing marker offset of group %q: %w", p.group, err)
				}
			}
		}
		return nil
	})
}

// retry runs fn until it succeeds, fails with an error that is not
// retriable, or ctx ends; at most 20 attempts.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = fn(); err == nil || !kerr.IsRetriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	return err
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// txnErr explains fencing and authorization errors of transactional id id.
func txnErr(err error, id, name string) error {
	switch {
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Errorf("transactional id %q was fenced by a newer producer with the same id (another process running this job, or another job using sink name %q); this producer stops: %w",
			id, name, fencedError{err})
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("not authorized to use transactional id %q: %w (check the ACLs of the client's principal)", id, err)
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return fmt.Errorf("not authorized to commit the marker offsets of group %q: %w (check the ACLs of the client's principal)", id, err)
	}
	return err
}

// handle is a pre-committed transaction: an epoch's encoded records.
//
// Layout (little endian): magic "EKS1", flags (1 byte, unused), lineage
// (16), subtask (u32), parallelism (u32), checkpoint (u64), record count
// (u64), fingerprint length (u16) and bytes, then per record: key length
// (i32, -1 for no key) and key, value length (u32) and value, timestamp in
// Unix milliseconds (zigzag varint).
type handle struct {
	lineage     [16]byte
	subtask     uint32
	parallelism uint32
	checkpoint  uint64
	count       uint64
	fp          string
	records     []byte
}

const (
	handleMagic     = "EKS1"
	handleFixedSize = 4 + 1 + 16 + 4 + 4 + 8 + 8 + 2
)

func handleHeaderSize(fp string) int { return handleFixedSize + len(fp) }

// putHandleHeader writes a handle's header into b[:handleHeaderSize(h.fp)].
func putHandleHeader(b []byte, h *handle) {
	copy(b, handleMagic)
	b[4] = 0
	copy(b[5:21], h.lineage[:])
	binary.LittleEndian.PutUint32(b[21:], h.subtask)
	binary.LittleEndian.PutUint32(b[25:], h.parallelism)
	binary.LittleEndian.PutUint64(b[29:], h.checkpoint)
	binary.LittleEndian.PutUint64(b[37:], h.count)
	binary.LittleEndian.PutUint16(b[45:], uint16(len(h.fp)))
	copy(b[handleFixedSize:], h.fp)
}

func parseHandle(b []byte) (handle, error) {
	var h handle
	if len(b) < handleFixedSize || string(b[:4]) != handleMagic {
		return h, fmt.Errorf("not a kafka sink transaction handle (%d bytes)", len(b))
	}
	copy(h.lineage[:], b[5:21])
	h.subtask = binary.LittleEndian.Uint32(b[21:])
	h.parallelism = binary.LittleEndian.Uint32(b[25:])
	h.checkpoint = binary.LittleEndian.Uint64(b[29:])
	h.count = binary.LittleEndian.Uint64(b[37:])
	n := int(binary.LittleEndian.Uint16(b[45:]))
	if len(b) < handleFixedSize+n || h.count > uint64(len(b)) {
		return h, fmt.Errorf("truncated kafka sink transaction handle (%d bytes)", len(b))
	}
	h.fp = string(b[handleFixedSize : handleFixedSize+n])
	h.records = b[handleFixedSize+n:]
	// Validate the records once, so that commit cannot stop half-way.
	var seen uint64
	if err := h.each(func([]byte, []byte, int64) error { seen++; return nil }); err != nil {
		return h, err
	}
	if seen != h.count {
		return h, fmt.Errorf("kafka sink transaction handle of checkpoint %d holds %d records, its header says %d", h.checkpoint, seen, h.count)
	}
	return h, nil
}

// each calls fn for every record of the handle; key and value alias the
// handle's bytes.
func (h *handle) each(fn func(key, value []byte, ts int64) error) error {
	b := h.records
	bad := func() error {
		return fmt.Errorf("corrupt kafka sink transaction handle of checkpoint %d", h.checkpoint)
	}
	for len(b) > 0 {
		if len(b) < 4 {
			return bad()
		}
		kl := int32(binary.LittleEndian.Uint32(b))
		b = b[4:]
		var key []byte
		if kl >= 0 {
			if int(kl) > len(b) {
				return bad()
			}
			key, b = b[:kl:kl], b[kl:]
		}
		if len(b) < 4 {
			return bad()
		}
		vl := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(vl) > uint64(len(b)) {
			return bad()
		}
		value := b[:vl:vl]
		b = b[vl:]
		ts, n := binary.Varint(b)
		if n <= 0 {
			return bad()
		}
		b = b[n:]
		if err := fn(key, value, ts); err != nil {
			return err
		}
	}
	return nil
}

// txnWriter buffers one subtask's records of the current epoch.
type txnWriter[T any] struct {
	s           *sink[T]
	subtask     int
	parallelism int
	lineage     [16]byte
	buf         []byte // header space, then records
	count       uint64
	capHint     int
	now         int64 // the current millisecond, refreshed every 256 records
}

func (w *txnWriter[T]) Write(rec *T) error {
	s := w.s
	if w.buf == nil {
		w.buf = make([]byte, handleHeaderSize(s.fp), max(w.capHint, 4096))
	}
	if w.count&255 == 0 {
		w.now = time.Now().UnixMilli()
	}
	b := w.buf
	start := len(b)
	if s.key != nil {
		if k := s.key(rec); k != nil {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
			b = append(b, k...)
		} else {
			b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
		}
	} else {
		b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b, err := s.enc(b, rec)
	if err != nil {
		w.buf = b[:start]
		return fmt.Errorf("kafka sink %s: encoding a record: %w", s.cfg.name, err)
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	b = binary.AppendVarint(b, w.now)
	w.buf = b
	w.count++
	if len(b) > s.cfg.maxBuffered {
		return fmt.Errorf("kafka sink %s: subtask %d buffered %d bytes of records since the last checkpoint, more than MaxBufferedBytes (%d); checkpoint more often or raise kafka.MaxBufferedBytes", s.cfg.name, w.subtask, len(b), s.cfg.maxBuffered)
	}
	return nil
}

func (w *txnWriter[T]) PreCommit(checkpointID uint64) ([]byte, error) {
	if w.count == 0 {
		return nil, nil
	}
	b := w.buf
	putHandleHeader(b, &handle{lineage: w.lineage, subtask: uint32(w.subtask), parallelism: uint32(w.parallelism),
		checkpoint: checkpointID, count: w.count, fp: w.s.fp})
	w.capHint = len(b) + len(b)/8
	w.buf, w.count = nil, 0
	return b, nil
}

func (w *txnWriter[T]) Close() error {
	w.buf, w.count = nil, 0
	return nil
}

// openDirect opens an AtLeastOnce or None writer: a plain idempotent
// producer.
func (s *sink[T]) openDirect(ctx context.Context) (connector.SinkWriter[T], error) {
	cl, _, err := newClient(&s.cfg.common, kgo.DefaultProduceTopic(s.topic))
	if err != nil {
		return nil, err
	}
	w := &directWriter[T]{s: s, cl: cl, ctx: ctx}
	if s.fp != "" {
		w.hdr = []kgo.RecordHeader{{Key: SchemaHeaderKey, Value: []byte(s.fp)}}
	}
	w.promise = func(_ *kgo.Record, err error) {
		if err != nil {
			w.first.CompareAndSwap(nil, &err)
		}
	}
	return w, nil
}

// directWriter produces records as they come.
type directWriter[T any] struct {
	s       *sink[T]
	cl      *kgo.Client
	ctx     context.Context
	hdr     []kgo.RecordHeader
	first   atomic.Pointer[error]
	promise func(*kgo.Record, error)
	// AtLeastOnce reuses record and value memory after each flush. Records
	// live in fixed-size chunks that never move (the client writes into
	// records it holds); values are appended to arena (the client only reads
	// them, and growth leaves earlier values where they were).
	chunks [][]kgo.Record
	chunk  int // chunks[chunk] is being filled
	used   int // records used in chunks[chunk]
	arena  []byte
}

const recordChunk = 1024

// record returns a zeroed record from the chunks.
func (w *directWriter[T]) record() *kgo.Record {
	if w.chunk == len(w.chunks) || w.used == recordChunk {
		if w.chunk < len(w.chunks) {
			w.chunk++
		}
		w.used = 0
		if w.chunk == len(w.chunks) {
			w.chunks = append(w.chunks, make([]kgo.Record, recordChunk))
		}
	}
	r := &w.chunks[w.chunk][w.used]
	w.used++
	*r = kgo.Record{}
	return r
}

func (w *directWriter[T]) err() error {
	if e := w.first.Load(); e != nil {
		return fmt.Errorf("kafka sink %s: produce: %w", w.s.cfg.name, resourceErr(*e, fmt.Sprintf("topic %q", w.s.topic)))
	}
	return nil
}

func (w *directWriter[T]) Write(rec *T) error {
	if err := w.err(); err != nil {
		return err
	}
	var r *kgo.Record
	if w.s.cfg.guarantee == AtLeastOnce {
		start := len(w.arena)
		a, err := w.s.enc(w.arena, rec)
		if err != nil {
			return fmt.Errorf("kafka sink %s: encoding a record: %w", w.s.cfg.name, err)
		}
		w.arena = a
		r = w.record()
		r.Topic, r.Value, r.Headers = w.s.topic, a[start:len(a):len(a)], w.hdr
	} else {
		v, err := w.s.enc(nil, rec)
		if err != nil {
			return fmt.Errorf("kafka sink %s: encoding a record: %w", w.s.cfg.name, err)
		}
		r = &kgo.Record{Topic: w.s.topic, Value: v, Headers: w.hdr}
	}
	if w.s.key != nil {
		r.Key = w.s.key(rec)
	}
	w.cl.Produce(w.ctx, r, w.promise)
	return nil
}

func (w *directWriter[T]) PreCommit(uint64) ([]byte, error) {
	if w.s.cfg.guarantee == AtLeastOnce {
		if err := w.cl.Flush(w.ctx); err != nil {
			return nil, fmt.Errorf("kafka sink %s: flush: %w", w.s.cfg.name, err)
		}
		// Every record is acknowledged: the client holds none any more.
		for _, c := range w.chunks {
			clear(c)
		}
		w.chunk, w.used, w.arena = 0, 0, w.arena[:0]
	}
	return nil, w.err()
}

func (w *directWriter[T]) Close() error {
	defer w.cl.Close()
	if w.s.cfg.guarantee == None && w.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
		defer cancel()
		_ = w.cl.Flush(ctx)
	}
	return nil
}

// fencedError marks a fencing error with connector.ErrFenced, keeping
// Kafka's error in the chain; fencing is permanent for this producer.
type fencedError struct{ err error }

func (e fencedError) Error() string { return e.err.Error() }
func (e fencedError) Unwrap() error { return e.err }
func (e fencedError) Is(target error) bool {
	return target == connector.ErrFenced || target == connector.ErrPermanent
}
