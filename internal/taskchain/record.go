package taskchain

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Kind says what a record does to the chain.
type Kind uint8

const (
	// KindClaim is the record a new owner writes to take the task over:
	// it opens an epoch and fences every older one.
	KindClaim Kind = 1
	// KindCommit is a checkpoint of the task's owner: its payload is what
	// the next owner restores from.
	KindCommit Kind = 2
)

// String names the kind: "claim" or "commit".
func (k Kind) String() string {
	switch k {
	case KindClaim:
		return "claim"
	case KindCommit:
		return "commit"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Record is one record of a task's chain, the object
// "tasks/<task>/chain/<Seq, 20 digits>". Records are immutable once
// written.
type Record struct {
	Seq     uint64    // position in the chain, from 1, dense
	Epoch   uint64    // the owner's epoch: one claim opens each, from 1
	Kind    Kind      // claim or commit
	Owner   string    // who wrote it (process, pid, start time)
	Time    time.Time // when its writer made it (the writer's clock; informative)
	Payload []byte    // a commit's opaque payload; nil for a claim

	// The links below let a reader find what it needs from the newest
	// record alone, without reading the chain back record by record.
	prevClaim  uint64 // newest claim record before this one, 0 if none
	prevCommit uint64 // newest commit record before this one, 0 if none
	floor      uint64 // every record below it but the claims was pruned
}

// IsZero reports whether r is the zero Record: what Claim returns for a
// task that has never committed.
func (r Record) IsZero() bool { return r.Seq == 0 }

// newestCommit is the seq of the newest commit at or before r.
func (r Record) newestCommit() uint64 {
	if r.Kind == KindCommit {
		return r.Seq
	}
	return r.prevCommit
}

// newestClaim is the seq of the newest claim at or before r.
func (r Record) newestClaim() uint64 {
	if r.Kind == KindClaim {
		return r.Seq
	}
	return r.prevClaim
}

// recordMagic starts every record: "ETC" (Eddy task chain) and the format
// version.
const recordMagic = "ETC\x01"

// Bounds on what a record may hold. A record is small: its payload is a
// reference to a checkpoint, not the checkpoint.
const (
	// MaxOwner is the longest owner string, in bytes.
	MaxOwner = 1024
	// MaxPayload is the largest payload of a commit, in bytes.
	MaxPayload = 1 << 20
	// MaxTask is the longest task id, in bytes.
	MaxTask = 128
)

// appendRecord appends the encoding of r to dst: the magic, the kind
// (one byte), then as uvarints seq, epoch, prevClaim, prevCommit and
// floor, the time as a varint of Unix nanoseconds, and the owner and the
// payload, each a uvarint length and its bytes. The store's trailer
// checksums the object; the encoding only has to be unambiguous.
func appendRecord(dst []byte, r *Record) []byte {
	dst = append(dst, recordMagic...)
	dst = append(dst, byte(r.Kind))
	for _, v := range [...]uint64{r.Seq, r.Epoch, r.prevClaim, r.prevCommit, r.floor} {
		dst = binary.AppendUvarint(dst, v)
	}
	dst = binary.AppendVarint(dst, r.Time.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(len(r.Owner)))
	dst = append(dst, r.Owner...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Payload)))
	return append(dst, r.Payload...)
}

// DecodeError says what is wrong with the bytes of a record object.
type DecodeError struct {
	Object string // the object's name
	Offset int    // where in its payload the problem is
	Reason string
}

// Error names the object, the offset and what is wrong.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("taskchain: record %q is corrupt at byte %d: %s", e.Object, e.Offset, e.Reason)
}

// decodeRecord decodes the record stored as the object name, which holds
// record seq. Every inconsistency (bad magic, a truncated field, a link
// that does not point backwards, trailing bytes, a record of another seq
// than its name says) is a *DecodeError naming the object; it never
// panics. The payload is copied out of data.
func decodeRecord(name string, seq uint64, data []byte) (Record, error) {
	d := decoder{name: name, b: data}
	var r Record
	if len(data) < len(recordMagic) || string(data[:len(recordMagic)]) != recordMagic {
		return r, d.fail("not a task chain record (magic %q, want %q)", data[:min(len(data), len(recordMagic))], recordMagic)
	}
	d.off = len(recordMagic)
	if d.off >= len(data) {
		return r, d.fail("truncated before the kind")
	}
	r.Kind = Kind(data[d.off])
	if r.Kind != KindClaim && r.Kind != KindCommit {
		return r, d.fail("unknown kind %d", data[d.off])
	}
	d.off++
	fields := [...]struct {
		name string
		v    *uint64
	}{{"seq", &r.Seq}, {"epoch", &r.Epoch}, {"previous claim", &r.prevClaim}, {"previous commit", &r.prevCommit}, {"floor", &r.floor}}
	for _, f := range fields {
		v, ok := d.uvarint()
		if !ok {
			return r, d.fail("truncated or overlong %s", f.name)
		}
		*f.v = v
	}
	t, n := binary.Varint(data[d.off:])
	if n <= 0 {
		return r, d.fail("truncated or overlong time")
	}
	d.off += n
	r.Time = time.Unix(0, t).UTC()
	owner, ok := d.bytes(MaxOwner)
	if !ok {
		return r, d.fail("truncated owner, or longer than %d bytes", MaxOwner)
	}
	r.Owner = string(owner)
	payload, ok := d.bytes(MaxPayload)
	if !ok {
		return r, d.fail("truncated payload, or longer than %d bytes", MaxPayload)
	}
	if len(payload) > 0 {
		r.Payload = append([]byte(nil), payload...)
	}
	if d.off != len(data) {
		return r, d.fail("%d bytes after the payload", len(data)-d.off)
	}
	d.off = 0
	if err := r.check(); err != "" {
		return r, d.fail("%s", err)
	}
	if r.Seq != seq {
		return r, d.fail("holds record %d, but its name says %d", r.Seq, seq)
	}
	return r, nil
}

// check reports what makes r inconsistent, or "".
func (r *Record) check() string {
	switch {
	case r.Seq == 0:
		return "seq 0"
	case r.Epoch == 0:
		return "epoch 0"
	case r.prevClaim >= r.Seq:
		return fmt.Sprintf("previous claim %d is not before the record's seq %d", r.prevClaim, r.Seq)
	case r.prevCommit >= r.Seq:
		return fmt.Sprintf("previous commit %d is not before the record's seq %d", r.prevCommit, r.Seq)
	case r.floor > r.Seq:
		return fmt.Sprintf("floor %d is after the record's seq %d", r.floor, r.Seq)
	case r.Kind == KindCommit && r.prevClaim == 0:
		return "a commit with no claim before it"
	case r.Kind == KindClaim && len(r.Payload) > 0:
		return "a claim with a payload"
	}
	if err := checkOwner(r.Owner); err != nil {
		return err.Error()
	}
	return ""
}

// decoder reads the fields of one record.
type decoder struct {
	name string
	b    []byte
	off  int
}

func (d *decoder) fail(format string, args ...any) error {
	return &DecodeError{Object: d.name, Offset: d.off, Reason: fmt.Sprintf(format, args...)}
}

func (d *decoder) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		return 0, false
	}
	d.off += n
	return v, true
}

// bytes reads a uvarint length of at most limit and that many bytes.
func (d *decoder) bytes(limit int) ([]byte, bool) {
	n, ok := d.uvarint()
	if !ok || n > uint64(limit) || n > uint64(len(d.b)-d.off) {
		return nil, false
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b, true
}

// ObjectName returns the name of record seq of task in the store:
// "tasks/<task>/chain/<seq, 20 digits>".
func ObjectName(task string, seq uint64) string {
	return fmt.Sprintf("%s%020d", chainPrefix(task), seq)
}

// chainPrefix is the prefix of the names of task's records.
func chainPrefix(task string) string { return "tasks/" + task + "/chain/" }

// parseSeq returns the seq of the record named name under prefix, and
// false for a name that is not a record's (20 digits, from 1).
func parseSeq(prefix, name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v > 0
}

// ValidateTask reports whether task may be a task id: 1 to MaxTask bytes
// of ASCII letters, digits, '-', '_', '.' and '=', not starting with '.'.
// An id is one segment of object names, so it must not hold a '/' or be
// ".." or a name a store reserves for its temporary files.
func ValidateTask(task string) error {
	switch {
	case task == "":
		return fmt.Errorf("taskchain: invalid task id %q: empty", task)
	case len(task) > MaxTask:
		return fmt.Errorf("taskchain: invalid task id %.40q...: %d bytes, longer than %d", task, len(task), MaxTask)
	case task[0] == '.':
		return fmt.Errorf("taskchain: invalid task id %q: starts with '.'", task)
	}
	for i, c := range []byte(task) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '=') {
			return fmt.Errorf("taskchain: invalid task id %q: byte %d is %q; use letters, digits, '-', '_', '.' and '='", task, i, c)
		}
	}
	return nil
}

// checkOwner reports whether owner may name an owner: 1 to MaxOwner
// bytes of printable UTF-8, so that it fits on one line of an error.
func checkOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("empty owner")
	case len(owner) > MaxOwner:
		return fmt.Errorf("owner of %d bytes, longer than %d", len(owner), MaxOwner)
	case !utf8.ValidString(owner):
		return fmt.Errorf("owner %q is not UTF-8", owner)
	}
	for _, c := range owner {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("owner %q holds the unprintable %U", owner, c)
		}
	}
	return nil
}
