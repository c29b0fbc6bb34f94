package main

// The Kafka variant of `eddy demo`, for `eddy demo --kafka BROKERS`. demo.go
// wires the flag: it calls kafkaDemoEnv instead of demojob.Env, runs the
// returned job like the file demo (same progress loop), and may print
// kafkaDemoDigest's result at the end.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	"github.com/eddyflow/eddy/connector/datagen"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/internal/admin"
	"github.com/eddyflow/eddy/internal/demojob"
	"github.com/eddyflow/eddy/state"
	"github.com/eddyflow/eddy/tasks"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The topics of the Kafka demo.
const (
	kafkaDemoPoints = "eddy-demo-gps"    // generated GPS points, protobuf, keyed by driver
	kafkaDemoTotals = "eddy-demo-totals" // running totals per driver, JSON, keyed by driver
)

// splitBrokers turns "host:port,host:port" into addresses.
func splitBrokers(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// kafkaDemoEnv prepares `eddy demo --kafka BROKERS` and returns the job to
// run:
//
//  1. It creates the topics eddy-demo-gps and eddy-demo-totals (8
//     partitions) unless they exist.
//  2. It loads c.Events generated GPS points (c's seed, drivers, late
//     points; not its rate) into eddy-demo-gps, keyed by driver, with the
//     exactly-once sink. The load is a bounded job of its own, checkpointed
//     under c.Data/kafka-load (storeAt: a subdirectory, or a sub-prefix of a
//     store URL): killed, it resumes; run again after it
//     finished, it writes nothing.
//  3. It returns the demo job, checkpointed under c.Data/kafka-job:
//     Kafka eddy-demo-gps (bounded by the offsets at its first start) →
//     KeyBy(driver) → running distance and point count per driver in keyed
//     state → Kafka eddy-demo-totals, exactly once, JSON values keyed by
//     driver, one line per c.EmitEvery-th point of a driver.
//
// Like the file demo, the committed content of eddy-demo-totals is the same
// whether or not the job was killed and resumed (kafkaDemoDigest checks
// it). Both topics belong to the demo; delete them and c.Data to start over.
// Progress of the load goes to stdout.
func kafkaDemoEnv(ctx context.Context, c demojob.Config, brokers []string, stdout io.Writer, reqs *blob.Counter, opts ...eddy.Option) (*eddy.Env, countedStore, error) {
	if err := kafkaDemoLoad(ctx, c, brokers, stdout, false, opts...); err != nil {
		return nil, countedStore{}, err
	}
	jobStore, err := openCounted(storeAt(c.Data, "kafka-job"), reqs)
	if err != nil {
		return nil, countedStore{}, err
	}
	env := eddy.New(append(append([]eddy.Option{eddy.JobName(kafkaDemoJob),
		eddy.CheckpointStore(jobStore, kafkaDemoInterval(c))}, kafkaDemoBase(c)...), opts...)...)
	kafkaDemoJobGraph(env, c, brokers, nil, true, "")
	return env, jobStore, nil
}

// kafkaDemoJob is the name of the Kafka demo's job.
const kafkaDemoJob = "eddy-demo-kafka"

func kafkaDemoInterval(c demojob.Config) time.Duration {
	if c.CheckpointInterval <= 0 {
		return 200 * time.Millisecond
	}
	return c.CheckpointInterval
}

func kafkaDemoBase(c demojob.Config) []eddy.Option {
	if c.Parallelism > 0 {
		return []eddy.Option{eddy.Parallelism(c.Parallelism)}
	}
	return nil
}

// kafkaDemoLoad creates the demo's topics unless they exist and loads
// c.Events generated GPS points into eddy-demo-gps, keyed by driver, with
// the exactly-once sink: a bounded job of its own, checkpointed under
// c.Data/kafka-load; killed, it resumes, and run again after it finished,
// it writes nothing. With shared (processes of one job starting at once,
// `demo --group`), a load that another process holds (a locked directory)
// or took over (a claimed object store) is waited for and tried again,
// and then writes nothing either.
func kafkaDemoLoad(ctx context.Context, c demojob.Config, brokers []string, stdout io.Writer, shared bool, opts ...eddy.Option) error {
	if len(brokers) == 0 {
		return fmt.Errorf("--kafka: no broker addresses")
	}
	if err := kafka.EnsureTopics(ctx, brokers, 8, kafkaDemoPoints, kafkaDemoTotals); err != nil {
		return err
	}
	lc := c
	lc.Rate = 0
	fmt.Fprintf(stdout, "eddy demo --kafka: loading %d GPS points into %s at %s\n", c.Events, kafkaDemoPoints, strings.Join(brokers, ","))
	start := time.Now()
	for {
		// The load's store requests are not the job's: counted apart, and
		// not reported.
		loadStore, err := openCounted(storeAt(c.Data, "kafka-load"), new(blob.Counter))
		if err != nil {
			return err
		}
		// The load writes as fast as it generates: its checkpoints come
		// often, and an interval's records may take more than the sink's
		// default buffer on a busy machine (a slow checkpoint lets the
		// next interval's records pile up).
		load := eddy.New(append(append([]eddy.Option{eddy.JobName("eddy-demo-kafka-load"),
			eddy.CheckpointStore(loadStore, min(kafkaDemoInterval(c), 100*time.Millisecond))}, kafkaDemoBase(c)...), opts...)...)
		points := eddy.FromSource(load, datagen.GPS(lc.GPSOptions()...), eddy.Named("gps"))
		eddy.ToSink(points, kafka.Sink[datagen.GPSPoint](kafkaDemoPoints, kafka.Brokers(brokers...), kafka.SchemaHeader(), kafka.MaxBufferedBytes(256<<20),
			kafka.Key(func(p *datagen.GPSPoint) []byte { return []byte(p.DriverID) })))
		err = load.Run(ctx)
		if err == nil {
			fmt.Fprintf(stdout, "eddy demo --kafka: load done in %v (%d points written by this process)\n",
				time.Since(start).Round(time.Millisecond), load.Stats().RecordsOut)
			return nil
		}
		if !shared || !errors.Is(err, eddy.ErrFenced) || ctx.Err() != nil {
			return fmt.Errorf("loading %s: %w", kafkaDemoPoints, err)
		}
		fmt.Fprintf(stdout, "eddy demo --kafka: another process is loading (%v); waiting\n", err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// kafkaDemoJobGraph adds the demo job to env: Kafka eddy-demo-gps (only
// partitions, if not nil; bounded by the offsets at its first start
// unless partitions is given and not bounded: a task of a group job runs
// until stopped, unless --until-end) →
// KeyBy(driver) → running distance and point count per driver in keyed
// state → Kafka eddy-demo-totals, exactly once, JSON values keyed by
// driver, one line per c.EmitEvery-th point of a driver; sinkName, if not
// empty, names the sink (its transactional ids).
func kafkaDemoJobGraph(env *eddy.Env, c demojob.Config, brokers []string, partitions []int32, bounded bool, sinkName string) {
	srcOpts := []kafka.SourceOpt{kafka.Brokers(brokers...), kafka.Topics(kafkaDemoPoints), kafka.MaxPartitions(64)}
	if partitions != nil {
		srcOpts = append(srcOpts, kafka.Partitions(partitions...))
	}
	if partitions == nil || bounded {
		srcOpts = append(srcOpts, kafka.Bounded())
	}
	in := eddy.FromSource(env, kafka.Source[datagen.GPSPoint](srcOpts...), eddy.Named("gps"))
	byDriver := eddy.KeyBy(in, func(p *datagen.GPSPoint) string { return p.DriverID })
	totals := eddy.Process[string, datagen.GPSPoint, demojob.DriverTotal](byDriver, &kafkaDistanceFn{emitEvery: c.EmitEvery}, eddy.Named("distance"))
	sinkOpts := []kafka.SinkOpt{kafka.Brokers(brokers...), kafka.WithEncoder(kafka.JSONEncoder[demojob.DriverTotal]()),
		kafka.Key(func(t *demojob.DriverTotal) []byte { return []byte(t.Driver) })}
	if sinkName != "" {
		sinkOpts = append(sinkOpts, kafka.SinkName(sinkName))
	}
	eddy.ToSink(totals, kafka.Sink[demojob.DriverTotal](kafkaDemoTotals, sinkOpts...))
}

// groupFlags are the settings of `eddy demo --kafka --group` that a
// one-process demo does not have.
type groupFlags struct {
	instance string        // --instance: static membership
	admin    string        // --admin: the process's /metrics
	session  time.Duration // --session-timeout; 0: the default
	untilEnd bool          // --until-end: each task stops at its partition's end
}

// kafkaDemoGroup runs `eddy demo --kafka BROKERS --group`: this process
// is one of the processes of the Kafka demo job, which share its tasks
// (one per partition of eddy-demo-gps) over a consumer group and keep
// each task's checkpoints under c.Data/kafka-tasks/tasks/<t>/. It loads
// the input first (once for all processes: see kafkaDemoLoad), then runs
// the tasks the group assigns it until ctx ends, printing each task as it
// starts, moves or ends, and finally hands its tasks over and leaves.
// With g.admin, it serves the metrics of its tasks (eddy_tasks_*, and
// each task's own, labelled job_name eddy-demo-kafka.t<task>) at /metrics
// on that address.
func kafkaDemoGroup(ctx context.Context, c demojob.Config, brokers []string, g groupFlags, stdout io.Writer, opts ...eddy.Option) error {
	if err := kafkaDemoLoad(ctx, c, brokers, stdout, true, opts...); err != nil {
		return err
	}
	store, err := blob.Open(storeAt(c.Data, "kafka-tasks"))
	if err != nil {
		return err
	}
	var reg *prometheus.Registry
	if g.admin != "" {
		reg = prometheus.NewRegistry()
		srv, err := serveMetrics(g.admin, reg)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(stdout, "eddy demo --kafka --group: metrics at http://%s/metrics\n", srv.Addr)
	}
	fmt.Fprintf(stdout, "eddy demo --kafka --group: joining job %s; tasks are the partitions of %s; stop with Ctrl-C (the process hands its tasks over)\n",
		kafkaDemoJob, kafkaDemoPoints)
	cfg := tasks.Config{Job: kafkaDemoJob, Brokers: brokers, Topic: kafkaDemoPoints, Store: store,
		Interval: kafkaDemoInterval(c), Instance: g.instance, SessionTimeout: g.session,
		Options: append(kafkaDemoBase(c), opts...), Log: stdout}
	if reg != nil {
		cfg.Metrics = reg
	}
	return tasks.Run(ctx, cfg, func(env *eddy.Env, task tasks.Task) error {
		kafkaDemoJobGraph(env, c, brokers, []int32{task.ID}, g.untilEnd, task.SinkName(kafkaDemoTotals))
		return nil
	})
}

// serveMetrics serves reg's metrics and the process's own (Go runtime,
// process) at /metrics on addr, a loopback address (port 0: any free
// port), until the server is closed; srv.Addr is the address bound.
func serveMetrics(addr string, reg *prometheus.Registry) (*http.Server, error) {
	if err := admin.CheckAddr(addr, false); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--admin: %w", err)
	}
	proc := prometheus.NewRegistry()
	proc.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, proc}, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// kafkaTotal is the keyed state of the Kafka demo job.
type kafkaTotal struct {
	Lat       float64 `proto:"1"`
	Lon       float64 `proto:"2"`
	Points    int64   `proto:"3"`
	DistanceM float64 `proto:"4,name=distance_m"`
}

// kafkaDistanceFn keeps each driver's running totals, like the file demo's.
type kafkaDistanceFn struct {
	emitEvery int64
	last      *state.Value[kafkaTotal]
}

func (f *kafkaDistanceFn) Open(ctx *eddy.OpenContext) error {
	var err error
	f.last, err = state.NewValue[kafkaTotal](ctx.State, "last-point")
	return err
}

func (f *kafkaDistanceFn) Process(ctx *eddy.Context[string, demojob.DriverTotal], p *datagen.GPSPoint) error {
	lp, seen := f.last.Get()
	if seen {
		lp.DistanceM += demojob.Haversine(lp.Lat, lp.Lon, p.Lat, p.Lon)
	}
	lp.Lat, lp.Lon = p.Lat, p.Lon
	lp.Points++
	f.last.Update(lp)
	if f.emitEvery > 1 && lp.Points%f.emitEvery != 0 {
		return nil
	}
	ctx.Emit(demojob.DriverTotal{Driver: p.DriverID, Points: lp.Points, DistanceM: math.Round(lp.DistanceM*1000) / 1000,
		At: p.Timestamp.UTC().Format(time.RFC3339Nano)})
	return nil
}

// kafkaDemoDigest reads eddy-demo-totals with read_committed isolation and
// returns the number of records and an order-independent digest of their
// values: equal for equal committed content, however the records are spread
// over partitions.
func kafkaDemoDigest(ctx context.Context, brokers []string) (int64, string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(kafkaDemoTotals),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0, "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, kafkaDemoTotals)
	if err != nil {
		return 0, "", err
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var n int64
	var sum [sha256.Size]byte
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, "", fmt.Errorf("reading %s: %w", kafkaDemoTotals, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return 0, "", ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			n++
			h := sha256.Sum256(r.Value)
			for i := range sum { // a sum of hashes: the order does not matter
				s := uint16(sum[i]) + uint16(h[i])
				sum[i] = byte(s)
			}
		})
	}
	return n, hex.EncodeToString(sum[:8]), nil
}
