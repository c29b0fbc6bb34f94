package tasks

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/connector/kafka"
	"github.com/eddyflow/eddy/internal/group"
)

// checkTopology records the job's topology in its store the first time a
// process of the job starts, and refuses to start a process whose
// topology differs: another partition count of the input, another max
// parallelism, other operators or record types (those of task 0's graph,
// which Build makes alike for every task).
func checkTopology(ctx context.Context, cfg Config, n int32, build Build) error {
	env := eddy.New(cfg.Options...)
	if err := build(env, cfg.task(0, n)); err != nil {
		return fmt.Errorf("tasks: building the job to check its topology: %w", err)
	}
	ops, maxPar := env.Describe()
	t := group.Topology{Job: cfg.Job, MaxParallelism: int32(maxPar)}
	for _, op := range ops {
		t.Operators = append(t.Operators, op.ID)
		h := fnv.New64a()
		h.Write([]byte(op.Kind + "\n" + op.Types))
		t.Schemas = append(t.Schemas, group.Schema{Name: op.ID, Fingerprint: h.Sum64()})
	}
	sort.Slice(t.Schemas, func(i, j int) bool { return t.Schemas[i].Name < t.Schemas[j].Name })
	t.Tasks = n
	return group.CheckTopology(ctx, cfg.Store, t)
}

// partitionCount returns the input topic's number of partitions.
func partitionCount(ctx context.Context, cfg Config) (int32, error) {
	n, err := kafka.PartitionCount(ctx, cfg.Topic, kafka.Brokers(cfg.Brokers...))
	if err != nil {
		return 0, fmt.Errorf("tasks: the input topic: %w", err)
	}
	return n, nil
}
