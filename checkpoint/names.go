package checkpoint

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// checkpointsDir is the prefix of every blob this package manages.
const checkpointsDir = "checkpoints/"

// manifestFile is the base name of a checkpoint's manifest.
const manifestFile = "MANIFEST"

// idDigits is the width ids are zero-padded to in blob names, so that names
// sort in id order (20 digits hold every uint64).
const idDigits = 20

func checkpointDir(id uint64) string {
	return fmt.Sprintf("%s%0*d/", checkpointsDir, idDigits, id)
}

// parseName returns the checkpoint id a blob name belongs to
// ("checkpoints/<id>/...") and whether it is that checkpoint's manifest.
// ok is false for names outside any checkpoint's directory.
func parseName(name string) (id uint64, manifest, ok bool) {
	rest, found := strings.CutPrefix(name, checkpointsDir)
	if !found || len(rest) <= idDigits || rest[idDigits] != '/' {
		return 0, false, false
	}
	for _, c := range []byte(rest[:idDigits]) {
		if c < '0' || c > '9' {
			return 0, false, false
		}
	}
	id, err := strconv.ParseUint(rest[:idDigits], 10, 64)
	if err != nil {
		return 0, false, false
	}
	return id, rest[idDigits+1:] == manifestFile, true
}

// maxOperatorName bounds the operator part of a state blob's base name,
// keeping it well within file systems' 255-byte limit.
const maxOperatorName = 100

// sanitize turns an operator name into a file-name-safe string: ASCII
// letters, digits, '_', '-' and inner '.' are kept. A name that had to be
// changed (or shortened) gets "~" and a hash of the original appended, so
// distinct operators never share a blob.
func sanitize(op string) string {
	var b strings.Builder
	for i := 0; i < len(op) && b.Len() < maxOperatorName; i++ {
		c := op[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	if b.String() == op && op != "" {
		return op
	}
	h := fnv.New32a()
	h.Write([]byte(op))
	return fmt.Sprintf("%s~%08x", b.String(), h.Sum32())
}
