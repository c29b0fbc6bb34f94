// Package group owns the membership of a job's processes and the
// assignment of its tasks to them (the "Beyond one machine" part of
// DESIGN.md): one Kafka consumer group per job decides which process runs
// which task, and the group moves tasks when a process joins, leaves or
// dies. It also owns the job's topology record, which keeps a process
// running another graph out of the group. Eddy grows no cluster manager:
// Kafka's group coordinator is the manager.
//
// # Tasks and the group
//
// A task is one partition of the job's input topic: task t reads
// partition t, with its keyed state. Join makes the process a member of
// the group GroupName(job) ("eddy.job." and the job's name), subscribed to
// the input topic, and the group's assignment of partitions is the
// assignment of tasks. The member reads no records: its client's fetching
// is paused for good, and it never polls (franz-go runs the group protocol
// in a goroutine of its own and calls the callbacks from there, whether or
// not anyone polls, as long as BlockRebalanceOnPoll is off, which it is).
// Auto-commit is off and the member commits no offsets: a task's source
// reads its partition itself, from the positions in the task's own
// checkpoints (internal/taskchain), never from the group's offsets. A test
// checks that members send no Fetch and no OffsetCommit request.
//
// The protocol is the classic one with franz-go's cooperative sticky
// balancer (KIP-429): a rebalance moves only the tasks that must move, and
// a member keeps running the tasks it keeps. A task moves in two steps:
// the first rebalance takes it from its owner, which hands it over
// (Revoked) and rejoins; the second gives it to its new owner (Assigned).
// So no task is ever assigned to two live members at once, and Revoked
// returns before the next owner's Assigned starts; the tests check both
// with a ledger of every callback, in one process and across processes.
// The second step waits for the other members' next heartbeat: with a
// 300 ms HeartbeatInterval the handover (Revoked returned to the next
// owner's Assigned) took 0.30 s at p50 and 0.30 to 0.60 s at p99 (one
// heartbeat, or two when one was just missed) in the tests on kfake, in
// one process and across processes; a killed member's tasks were owned
// again 3.2 s after the kill with a 3 s SessionTimeout.
//
// KIP-848 groups (the broker assigns; franz-go's ServerSideBalancer) are
// not used: they need Kafka 4.0+ (franz-go recommends 4.3+), and the
// classic protocol runs on every broker Eddy supports. kfake implements
// both, and static membership in either; the tests use the classic one.
//
// # Static membership
//
// With Config.Instance set the member is static (KIP-345): a process that
// dies, or Detaches, and comes back with the same Instance before its
// SessionTimeout ends takes its place in the group and gets its tasks
// back, while the other members keep theirs and hand nothing over.
// Meanwhile its tasks are idle: a long session timeout trades the time a
// dead process's tasks wait for fast restarts. (Apache Kafka takes the
// member back without a rebalance; kfake rebalances, since it compares
// the join's metadata byte for byte and a restarted member does not name
// the partitions it owned yet, but the sticky balancer moves nothing.) An
// Instance must be unique among the job's live processes: a second
// process with the same one fences the first out of the group.
//
// # Handover, loss and leaving
//
// Revoked is the handover. It runs before the group may give its tasks to
// another member, and the rebalance waits for it; the caller takes a
// final checkpoint of each task, commits it to the task's chain and stops
// the task, so its next owner restores that commit and replays nothing.
// Its ctx ends after HandoverTimeout (default half the RebalanceTimeout),
// which Join requires to be below RebalanceTimeout less a heartbeat
// interval: a handover ends inside the rebalance that asked for it. A
// Revoked that fails, or returns after its ctx ended, is logged with its
// tasks and the member leaves the group (Done closes, Err says why): its
// store or its tasks are in trouble, and the others should run its tasks.
// The tasks it failed to hand over are given up all the same; their next
// owners claim their chains, restore their last commits and replay from
// there, as after a crash, and the claim fences whatever the failing
// member might still try to commit.
//
// Lost means the member was out of the group without knowing it: its
// session expired (a pause longer than SessionTimeout: a stopped process,
// a long collection, a network partition), or another error ended its
// group session. Its tasks may run elsewhere already. The caller stops
// them without committing more: a commit either lands before the new
// owner's claim on the task's chain, and the new owner restores it, or
// fails with taskchain.ErrFenced. The
// member then rejoins by itself and may be assigned tasks again. A
// member that is paused is not told anything until it runs again, so
// the Kafka group alone cannot keep a zombie from committing; the task
// chain does (TestProcessZombie stops a member process with SIGSTOP past
// its session timeout and checks both the Lost and the fenced commits).
//
// Close hands every task over (Revoked) and leaves the group, a static
// member too, so a planned shutdown moves the tasks at once and replays
// nothing. Detach hands every task over and stops without leaving, so a
// static member's restart gets its tasks back without a rebalance.
//
// # Errors
//
// Join asks the brokers for the input topic's partitions before it joins
// anything: brokers that do not answer within ConnectTimeout fail it with
// their addresses and the last connection error, a missing topic with
// the topic's name. A group error that retrying cannot cure (a refused
// authorization, a session timeout outside the brokers' bounds) fails
// Join; later group errors are logged through Logf, and the client
// retries them.
//
// # Topology
//
// CheckTopology records the job's topology (task count, max parallelism,
// operator ids, schema fingerprints) as the object "job/topology" in the
// job's store the first time, with a conditional create, so of processes
// starting at once one records it; every later process compares its own
// with it and is refused, with a *TopologyError naming the first field
// that differs and both values, when they differ. A process checks it
// before it joins the group. The record is versioned ("ETO" and a version
// byte), checksummed by the store's trailer, and decoded field by field
// (FuzzDecodeTopology); a damaged one is an error naming the object,
// never overwritten.
package group
