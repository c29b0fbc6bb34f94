package demojob

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddyflow/eddy"
	"github.com/eddyflow/eddy/blob"
	_ "github.com/eddyflow/eddy/blob/file" // the file scheme of blob.Open
	_ "github.com/eddyflow/eddy/blob/s3"   // the s3 scheme, for the crash tests on S3
	"github.com/eddyflow/eddy/checkpoint"
	"github.com/eddyflow/eddy/dstl"
)

// helperEnv carries the JSON-encoded Config of the demo job that
// TestHelperDemoProcess runs when the test binary is re-executed.
const helperEnv = "EDDY_DEMOJOB_HELPER_CONFIG"

// crashSeedEnv overrides the seed of TestCrashResumeExactlyOnce's kill
// schedule, to replay a failure.
const crashSeedEnv = "EDDY_CRASH_SEED"

// TestHelperDemoProcess is not a test: it is the body of the subprocess that
// TestCrashResumeExactlyOnce starts and kills. It runs the demo job with the
// configuration in $EDDY_DEMOJOB_HELPER_CONFIG and exits 0 once the job has
// finished, 1 on any error. Without the variable it returns at once.
func TestHelperDemoProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		return
	}
	var c Config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "helper: bad config: %v\n", err)
		os.Exit(2)
	}
	// No restarts inside the process: any failure must surface as exit code
	// 1, not be retried and hidden.
	env := Env(c, eddy.LogOutput(os.Stderr), eddy.Restarts(0, 0))
	if err := env.Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "helper: run: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// manifestIDs lists the ids of the checkpoints whose MANIFEST exists in
// the checkpoint storage data (a directory or a store URL).
func manifestIDs(data string) []uint64 {
	if !strings.Contains(data, "://") {
		paths, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*", "MANIFEST"))
		var ids []uint64
		for _, p := range paths {
			if id, err := strconv.ParseUint(filepath.Base(filepath.Dir(p)), 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
		return ids
	}
	store, err := openStore(data)
	if err != nil {
		return nil
	}
	ids, _ := checkpoint.NewStorage(store, 100).List(context.Background())
	return ids
}

var (
	storesMu sync.Mutex
	stores   = map[string]blob.Store{}
	// direct maps the URL of a store behind a fault proxy to the URL of
	// the same store without it: the test itself reads the checkpoints
	// directly, only the job meets the faults.
	direct = map[string]string{}
)

// openStore opens the store of a URL once per test binary.
func openStore(url string) (blob.Store, error) {
	storesMu.Lock()
	defer storesMu.Unlock()
	if s, ok := stores[url]; ok {
		return s, nil
	}
	open := url
	if d, ok := direct[url]; ok {
		open = d
	}
	s, err := blob.Open(open)
	if err == nil {
		stores[url] = s
	}
	return s, err
}

func maxID(ids []uint64) uint64 {
	var m uint64
	for _, id := range ids {
		m = max(m, id)
	}
	return m
}

// remainingEvents estimates, from the newest readable checkpoint, how many
// events the slowest split still has to read; -1 without a checkpoint. With a
// rate limit every split's remaining time is about this / rate.
func remainingEvents(t *testing.T, c Config) int64 {
	t.Helper()
	store, err := openStore(c.Data)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := checkpoint.NewStorage(store, 100).Latest(context.Background())
	if err != nil || m == nil {
		return -1
	}
	rem := int64(0)
	for _, s := range m.Sources {
		for _, sp := range s.Splits {
			if sp.Done {
				continue
			}
			pos, n := binary.Uvarint(sp.Pos)
			if n <= 0 {
				continue
			}
			rem = max(rem, c.Events-int64(pos))
		}
	}
	return rem
}

// procResult is how one run of the helper process ended.
type procResult struct {
	killed   bool
	exitErr  error
	stderr   string
	duration time.Duration
}

// runHelper starts the demo job in a subprocess and SIGKILLs it after delay
// unless it exits before; delay < 0 waits for it to exit. beforeKill runs
// just before the kill.
func runHelper(t *testing.T, c Config, delay time.Duration, beforeKill func()) procResult {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDemoProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var res procResult
	var timer <-chan time.Time
	if delay >= 0 {
		timer = time.After(delay)
	}
	select {
	case res.exitErr = <-exited:
	case <-timer:
		if beforeKill != nil {
			beforeKill()
		}
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		res.exitErr = <-exited
		// The process may have exited by itself between the timer and the
		// kill; only a death by signal is a kill.
		var ee *exec.ExitError
		res.killed = errors.As(res.exitErr, &ee) && !ee.Exited()
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("helper process hung; its output:\n%s", stderr.String())
	}
	res.duration = time.Since(start)
	res.stderr = stderr.String()
	if !res.killed && res.exitErr != nil {
		t.Fatalf("helper process failed (%v) with parallelism %d; its output:\n%s", res.exitErr, c.Parallelism, res.stderr)
	}
	return res
}

// TestCrashResumeExactlyOnce SIGKILLs the demo job at random moments,
// restarting it each time with the same directories and another
// parallelism, and checks that once it finally completes its committed output
// is exactly the reference: nothing lost, nothing duplicated.
//
// The kill schedule comes from a logged seed; set EDDY_CRASH_SEED to replay it.
func TestCrashResumeExactlyOnce(t *testing.T) { crashResume(t, false, localData, 0) }

// TestCrashResumeChangelog is the crash test with the changelog state
// backend materializing every 150 ms, so kills land during
// materializations, log uploads and log truncation (checkpoint pruning).
func TestCrashResumeChangelog(t *testing.T) { crashResume(t, true, localData, 0) }

// TestCrashResumePebble is the crash test with the keyed state in Pebble:
// kills land while databases are restored (downloaded, cut and copied at
// another parallelism), during their checkpoints' uploads and retention's
// deletes of shared files. Runs of killed processes leave their local
// directories behind, which the next run removes.
func TestCrashResumePebble(t *testing.T) { crashResumeOn(t, pebbleState, localData, 0) }

// TestCrashResumePebbleChangelog is the crash test with the keyed state in
// Pebble and the changelog state backend materializing every 150 ms: kills
// land during materializations (a database's checkpoint uploading while
// checkpoints keep its objects from pruning), while databases restored at
// another parallelism are still listed narrowed to the subtasks' key
// groups, and during log replays into restored databases.
func TestCrashResumePebbleChangelog(t *testing.T) {
	crashResumeOn(t, pebbleChangelogState, localData, 0)
}

// stateBackend is the state backend a crash test runs the demo on.
type stateBackend int

const (
	heapState stateBackend = iota
	changelogState
	pebbleState
	pebbleChangelogState
	// changelogBatchesState is the changelog with a 16 KiB log threshold:
	// each checkpoint interval's log is several batches, which S3 streams
	// into one object of several frames.
	changelogBatchesState
)

// localRestore matches the log line of a Pebble restore that took files
// from local copies.
var localRestore = regexp.MustCompile(`restored Pebble state.*local_files=[1-9]`)

// localData keeps the checkpoints in a directory under dir.
func localData(t *testing.T, dir string) string { return filepath.Join(dir, "data") }

// crashResume runs the crash test with the checkpoints (and the DSTL) in
// the storage data returns, a directory or a store URL. slow is added to
// the kill delays (except the early ones, during start-up) on storage
// slow to reach a first checkpoint.
func crashResume(t *testing.T, changelog bool, data func(t *testing.T, dir string) string, slow time.Duration) {
	b := heapState
	if changelog {
		b = changelogState
	}
	crashResumeOn(t, b, data, slow)
}

// crashResumeOn is crashResume on any state backend.
func crashResumeOn(t *testing.T, backend stateBackend, data func(t *testing.T, dir string) string, slow time.Duration) {
	seed := testSeed(t, crashSeedEnv) // the kill schedule; kills still land by wall-clock time
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))

	minKills := 30
	if testing.Short() {
		minKills = 20 // the floor, also in CI
	}
	dir := t.TempDir()
	// About 3.75 s uninterrupted on two cores: long enough for the kills
	// below to land all over the job, checkpoints included.
	c := Config{Seed: 42, Events: 150_000, Drivers: 300, Data: data(t, dir), Out: filepath.Join(dir, "out"),
		Rate: 40_000, LateEvery: 29, Changelog: backend == changelogState || backend == pebbleChangelogState || backend == changelogBatchesState,
		Materialize: 150 * time.Millisecond}
	if backend == changelogBatchesState {
		c.LogFlushBytes = 16 << 10
	}
	if backend == pebbleState || backend == pebbleChangelogState {
		c.PebbleDir = filepath.Join(dir, "pebble")
	}
	want := expected(c)

	var runs, kills, killsWithCheckpoint, killsAfterOwnCheckpoint, restores, localRestores, endgame int
	par := 0
	pickPar := func() int {
		for {
			if p := 1 + rng.IntN(3); p != par {
				return p
			}
		}
	}
	round := func(delay time.Duration) procResult {
		par = pickPar()
		c.Parallelism = par
		c.CheckpointInterval = []time.Duration{10, 20, 35, 50}[rng.IntN(4)] * time.Millisecond
		before := maxID(manifestIDs(c.Data))
		var atKill []uint64
		res := runHelper(t, c, delay, func() { atKill = manifestIDs(c.Data) })
		t.Logf("run %d: parallelism %d, interval %v, delay %v: killed %v after %v, newest checkpoint %d -> %d",
			runs, par, c.CheckpointInterval, delay, res.killed, res.duration.Round(time.Millisecond), before, maxID(manifestIDs(c.Data)))
		runs++
		if strings.Contains(res.stderr, "restoring from checkpoint") {
			restores++
		}
		if localRestore.MatchString(res.stderr) {
			localRestores++
		}
		if res.killed {
			kills++
			if len(atKill) > 0 {
				killsWithCheckpoint++
			}
			if maxID(atKill) > before {
				killsAfterOwnCheckpoint++
			}
		}
		return res
	}

	// leftTime is how long the job would still run uninterrupted, from its
	// newest checkpoint; -1 without one.
	leftTime := func() time.Duration {
		rem := remainingEvents(t, c)
		if rem < 0 {
			return -1
		}
		return time.Duration(float64(rem) / c.Rate * float64(time.Second))
	}
	// Phase 1: kills all over the job, some during start-up and restore.
	// Delays are capped by a share of the time left, so that the job does
	// not finish before minKills kills however fast this machine starts
	// processes.
	finished := false
	for kills < minKills {
		var delay time.Duration
		if rng.IntN(6) == 0 {
			delay = time.Duration(rng.IntN(30)) * time.Millisecond
		} else {
			delay = slow + 30*time.Millisecond + time.Duration(rng.IntN(170))*time.Millisecond
		}
		if left := leftTime(); left >= 0 {
			delay = min(delay, 10*time.Millisecond+left*3/time.Duration(2*(minKills-kills+1)))
			if killsAfterOwnCheckpoint == 0 && rng.IntN(2) == 0 {
				// No killed run has completed a checkpoint of its own
				// yet: restoring and checkpointing take longer than the
				// delays (a loaded machine, a remote store). Every other
				// kill then waits longer each time, so that some kill
				// lands after a run's own checkpoint, which the test
				// requires (the capped delays above never grow).
				delay += time.Duration(kills) * 25 * time.Millisecond
			}
		} else if kills > 0 {
			// No checkpoint yet after kills: start-up is slower than the
			// delays (a loaded machine, a remote store); wait longer each
			// time, so that the kills still exercise restores.
			delay += time.Duration(kills) * 50 * time.Millisecond
		}
		if !round(delay).killed {
			finished = true
			t.Logf("the job finished before kill %d", kills+1)
			break
		}
	}
	// Phase 2: kills closer and closer to the predicted end of the job (the
	// last records, the final checkpoint and its commit), until a run
	// completes by itself.
	for !finished && endgame < 8 {
		left := leftTime()
		if left < 0 {
			break
		}
		t.Logf("about %v of the job left", left.Round(time.Millisecond))
		delay := 40*time.Millisecond + time.Duration(float64(left)*(0.5+rng.Float64()))
		res := round(delay)
		endgame++
		finished = !res.killed
	}
	// The final, uninterrupted run (unless the job completed above).
	if !finished {
		round(-1)
	}
	t.Logf("%d kills (%d with a complete checkpoint on disk, %d after the killed run completed a checkpoint of its own, %d aimed at the end), %d runs restored a checkpoint",
		kills, killsWithCheckpoint, killsAfterOwnCheckpoint, endgame, restores)

	sameLines(t, committed(t, c.Out), want)
	noPending(t, c.Out)
	if kills < minKills {
		t.Fatalf("only %d kills, want at least %d", kills, minKills)
	}
	if killsWithCheckpoint == 0 || killsAfterOwnCheckpoint == 0 || restores == 0 {
		t.Fatalf("the kills did not exercise restore: %d with a checkpoint on disk, %d after a checkpoint of the killed run, %d restores",
			killsWithCheckpoint, killsAfterOwnCheckpoint, restores)
	}
	if backend == changelogBatchesState {
		streamedObjects(t, c.Data)
	}
	if backend == pebbleState {
		// Local recovery: restores take the files a killed process left
		// on local disk, where they are intact (a kill during start-up
		// leaves none).
		t.Logf("%d runs restored Pebble files from local copies", localRestores)
		if localRestores == 0 {
			t.Fatal("no restore took a Pebble file from the local copies killed processes left")
		}
	}

	// A finished job started again, with yet another parallelism, changes
	// nothing.
	round(-1)
	sameLines(t, committed(t, c.Out), want)
	noPending(t, c.Out)
	if !strings.Contains(c.Data, "://") {
		logLeftovers(t, c.Data)
	}
	if c.PebbleDir != "" {
		// The last runs removed what killed runs left, and their own.
		if ents, _ := os.ReadDir(c.PebbleDir); len(ents) != 0 {
			t.Fatalf("%s holds %d entries after the last run, first %s", c.PebbleDir, len(ents), ents[0].Name())
		}
	}
}

// logLeftovers logs what kills left behind in the checkpoint directory:
// temporary files of interrupted writes, which the blob store's List never
// sees, so pruning never deletes them, nor the directories holding them.
func logLeftovers(t *testing.T, data string) {
	t.Helper()
	var tmp []string
	dirs, _ := filepath.Glob(filepath.Join(data, "checkpoints", "*"))
	for _, d := range dirs {
		names, _ := filepath.Glob(filepath.Join(d, ".*"))
		tmp = append(tmp, names...)
	}
	t.Logf("%d checkpoint directories, %d with a manifest, %d leftover temporary files %v",
		len(dirs), len(manifestIDs(data)), len(tmp), tmp)
}

// streamedObjects checks that the log objects the retained checkpoints
// reference on a store that builds objects from parts hold several
// batches each, often: a writer with two sections in one object is two
// batches streamed into it.
func streamedObjects(t *testing.T, data string) {
	t.Helper()
	s, err := openStore(data)
	if err != nil {
		t.Fatal(err)
	}
	names, err := s.List(context.Background(), "checkpoints/")
	if err != nil {
		t.Fatal(err)
	}
	var logs, streamed int
	for _, name := range names {
		if !strings.Contains(name, "/dstl-") {
			continue
		}
		raw, err := s.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		o, err := dstl.DecodeObject(raw)
		if err != nil {
			t.Fatalf("log object %s: %v", name, err)
		}
		logs++
		seen := map[string]bool{}
		for _, sec := range o.Sections {
			if seen[sec.Writer] {
				streamed++
				break
			}
			seen[sec.Writer] = true
		}
	}
	t.Logf("%d of %d log objects in the store hold several batches of a writer", streamed, logs)
	if streamed == 0 {
		t.Fatalf("none of the %d log objects was streamed from several batches", logs)
	}
}
