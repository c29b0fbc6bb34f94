// Package tasks runs one job on several processes: the processes started
// with the same job (same code, same job name, same brokers, same shared
// checkpoint store) share its work, and move it between them when one
// dies, joins or leaves (the "Beyond one machine" part of DESIGN.md).
//
// A task is the job over one partition of its input topic: task t reads
// partition t (kafka.Partitions(t)) and keeps the keyed state of the keys
// that partition holds, so the input must be partitioned by the job's
// key. Run makes the process a member of the job's Kafka consumer group
// (internal/group: cooperative rebalancing, optional static membership)
// and runs each task the group assigns it as an eddy.Env of its own,
// which Build fills with the task's graph. A task checkpoints on its own,
// into the sub-store "tasks/<t>/" of the shared store (blob.Sub).
//
// # Moving a task
//
// When the group takes a task from this process in a rebalance, Run hands
// it over: Env.StopWithCheckpoint takes a checkpoint, commits the task's
// output and stops it, all before the group gives the task to its next
// owner, which restores that checkpoint and replays nothing. When the
// process was out of the group (its session expired: a long pause, a
// network partition), its tasks are lost instead: Run cancels them
// without a checkpoint, and their next owners restore their last
// checkpoints and replay from there.
//
// # Fencing
//
// Two owners of one task can overlap: a process paused past its session
// timeout runs its tasks on when it resumes, until it learns it lost
// them. Its writes cannot commit anything. Each task has a commit chain
// in the job's store (internal/taskchain: records "tasks/<t>/chain/<seq>",
// each written once by a conditional create). Each run of a task claims
// the chain before it reads the task's checkpoints, by writing its next
// record (a new owner epoch), and commits each checkpoint by writing the
// record after its own last one, between the checkpoint's manifest and
// its output (eddy.ClaimStore, blob.CommitLease). An older owner's next
// commit finds its seq taken by the claim and fails, so it commits
// nothing of that checkpoint; and the task's Kafka sinks, named apart per
// task (see SinkName), use the transactional ids of the task, which the
// new owner's producers fence. A task fenced while the group still gives
// it to this process was claimed by a process out of the group (a
// zombie's claim that was in flight when it paused): it claims its chain
// again once the group's coordinator confirms the task is this
// process's. A process that finds itself fenced by a newer owner, or
// whose tasks the group declares lost, hands its other tasks over and
// Run returns the fencing error (eddy.ErrFenced); Config.Rejoin keeps it
// in the job instead.
//
// # Keys that are not the input's
//
// A task holds the keys of one input partition, so eddy.KeyBy within a
// task is right only for the key the input is partitioned by. KeyBy of
// this package re-keys across tasks: the records go through an internal
// topic of the job (one per such edge, as many partitions as the input),
// written by every task exactly once and read by task t from its
// partition t, read_committed. A record crosses the edge when its
// writer's checkpoint commits.
//
// # Metrics
//
// With Config.Metrics, Run registers the process's metrics of its tasks,
// labelled job_name: eddy_tasks_owned (tasks the group gives it now, ended
// ones included), eddy_tasks_lag_records{task} (records of a task's
// partition it has not read: the high watermark minus its next offset, as
// its Kafka source knows them, see eddy.Env.SourceLag; its committed
// position trails by up to a checkpoint interval; on an input written in
// transactions a commit marker after the last record read counts as one,
// so a task that has read everything may show 1), eddy_tasks_rebalances_total and
// eddy_tasks_rebalance_duration_seconds (each rebalance the process took
// part in, from its first JoinGroup request to its new tasks started,
// handovers included), eddy_tasks_handover_duration_seconds (a task's
// StopWithCheckpoint when it moves away), eddy_tasks_handover_failures_total
// and eddy_tasks_lost_total{reason} (session: moved while the process was
// out of the group; fenced: claimed by a newer owner first). Each task's
// Env registers its own metrics there too, labelled job_name
// "<job>.t<task>".
package tasks
