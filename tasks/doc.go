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
// them. Its writes cannot commit anything. Each run of a task claims the
// task's sub-store before it reads it (blob.Claim, a conditional create
// of the next epoch: a sub-store is never locked), and a run checks its
// claim after writing a checkpoint's manifest and before committing that
// checkpoint's output, so the older owner fails its next checkpoint and
// commits nothing; and the task's Kafka sinks, named apart per task (see
// SinkName), use the transactional ids of the task, which the new owner's
// producers fence.
//
// # Metrics
//
// With Config.Metrics, Run registers the process's metrics of its tasks,
// labelled job_name: eddy_tasks_owned (tasks it runs now),
// eddy_tasks_lag_records{task} (records of a task's partition it has not
// read: the high watermark minus its next offset, as its Kafka source
// knows them, see eddy.Env.SourceLag; its committed position trails by up
// to a checkpoint interval), eddy_tasks_rebalances_total and
// eddy_tasks_rebalance_duration_seconds (each rebalance the process took
// part in, from its first JoinGroup request to its new tasks started,
// handovers included), eddy_tasks_handover_duration_seconds (a task's
// StopWithCheckpoint when it moves away), eddy_tasks_handover_failures_total
// and eddy_tasks_lost_total{reason} (session: moved while the process was
// out of the group; fenced: claimed by a newer owner first). Each task's
// Env registers its own metrics there too, labelled job_name
// "<job>.t<task>".
//
// Not yet here (issue 21): re-keying between processes through internal
// topics (a KeyBy on another field than the input's key), and the per-task
// commit chain of internal/taskchain in place of the claim.
package tasks
