package serde

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Verdict is the outcome of comparing the schema stored with some data to the
// schema of the type that is about to read it.
type Verdict int

// The verdicts of Check, from best to worst.
const (
	AsIs           Verdict = iota // old bytes read correctly as they are
	AfterMigration                // old bytes read, but values may truncate or be reinterpreted: migrate
	Incompatible                  // restore must fail
)

// String returns the name of v.
func (v Verdict) String() string {
	switch v {
	case AsIs:
		return "AsIs"
	case AfterMigration:
		return "AfterMigration"
	case Incompatible:
		return "Incompatible"
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Compatibility is the result of Check.
type Compatibility struct {
	Verdict Verdict // the worst verdict of the reasons (AsIs when none)
	// Reasons lists every difference found, in field order, including the
	// ones read as they are (fields added, removed or renamed, widening), for
	// people to read.
	Reasons []Reason
}

// Reason is one difference between two schemas.
type Reason struct {
	Path    string  // field path in proto names with numbers, e.g. "OrderCreatedEvent.items.unit_price (3.4)"
	Old     string  // the old side, e.g. "int64", "absent", "reserved", "map<string, int64>", "codec money v1"
	New     string  // the new side
	Rule    string  // the rule in words, e.g. "narrowing int64 to int32 may truncate values"
	Verdict Verdict // what this difference alone means
}

// String formats r on one line.
func (r Reason) String() string {
	return fmt.Sprintf("%s: %s -> %s: %s [%s]", r.Path, r.Old, r.New, r.Rule, r.Verdict)
}

// Err returns nil unless c is Incompatible; the error lists every reason,
// one per line.
func (c Compatibility) Err() error {
	if c.Verdict < Incompatible {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "serde: incompatible schema change (%s):", plural(len(c.Reasons), "reason"))
	for _, r := range c.Reasons {
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	return errors.New(b.String())
}

// String summarizes c: the verdict, then one line per reason.
func (c Compatibility) String() string {
	if len(c.Reasons) == 0 {
		return c.Verdict.String() + ": the schemas encode alike"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", c.Verdict, plural(len(c.Reasons), "difference"))
	for _, r := range c.Reasons {
		b.WriteString("\n\t")
		b.WriteString(r.String())
	}
	return b.String()
}

// ordinal spells position i (from 0) as first, second, ... 5th.
func ordinal(i int) string {
	if i < 4 {
		return [...]string{"first", "second", "third", "fourth"}[i]
	}
	return strconv.Itoa(i+1) + "th"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// Check compares the schema old, stored with some state values or events,
// with new, the schema of the type that is to read them, by protobuf's
// evolution rules. It walks the message trees from the roots (whatever their
// names), matches fields by number and recurses into nested messages, and
// reports every difference it finds; the verdict is the worst of them.
//
// Added and removed fields, renamed fields and messages, widening integers
// (int32 to int64) and singular to optional are read as they are. Changes
// that keep the wire type but may truncate or reinterpret values (int64 to
// int32, int to uint, zigzag to plain, enum to int, string to bytes, a
// narrower Go integer type, a singular string to a repeated one) need a
// migration. Changes of wire type, reuse of numbers or names the old message
// reserved, maps turned into other fields, and custom codecs replaced,
// changed without a registered migration or changed without a version bump
// are incompatible.
//
// Oneofs follow protobuf's rules: a single field may move into a new oneof,
// and fields may move out of one or a oneof split, since old data has at
// most one member set; moving fields into an existing oneof, several fields
// into a new one, or merging oneofs is incompatible, since old data that set
// more than one of them would keep only the last. Renamed and reordered
// oneofs read as they are.
func Check(old, new Schema) Compatibility {
	c := checker{old: &old, new: &new}
	return c.run()
}

// CheckKey is Check for state keys: keys must encode to the same bytes, so
// any change to the encoding (fields added or removed, kinds, cardinalities,
// map keys, Go integer widths, codec names, versions and layouts) is
// Incompatible. Renaming fields and messages is the only change read as is.
func CheckKey(old, new Schema) Compatibility {
	c := checker{old: &old, new: &new, key: true}
	return c.run()
}

type checker struct {
	old, new *Schema
	key      bool               // CheckKey: every encoding change is Incompatible
	root     string             // the first element of every path
	seen     map[[2]string]bool // (old message, new message) pairs compared
	out      Compatibility
}

// fieldPath is the path of a field below the root, in proto names and
// numbers.
type fieldPath struct {
	names, nums []string
}

func (p fieldPath) child(name string, num uint32) fieldPath {
	return fieldPath{
		names: append(p.names[:len(p.names):len(p.names)], name),
		nums:  append(p.nums[:len(p.nums):len(p.nums)], strconv.FormatUint(uint64(num), 10)),
	}
}

func (c *checker) path(p fieldPath) string {
	if len(p.names) == 0 {
		return c.root
	}
	return c.root + "." + strings.Join(p.names, ".") + " (" + strings.Join(p.nums, ".") + ")"
}

func (c *checker) run() Compatibility {
	c.seen = map[[2]string]bool{}
	c.root = c.new.Root
	if c.root == "" {
		c.root = c.old.Root
	}
	om, nm := c.old.Message(c.old.Root), c.new.Message(c.new.Root)
	switch {
	case om == nil:
		c.add(fieldPath{}, "absent", c.new.Root, "the old schema lacks its root message "+strconv.Quote(c.old.Root), Incompatible, true)
	case nm == nil:
		c.add(fieldPath{}, c.old.Root, "absent", "the new schema lacks its root message "+strconv.Quote(c.new.Root), Incompatible, true)
	default:
		c.message(fieldPath{}, om, nm)
	}
	return c.out
}

// add records a difference. encoding says whether it changes the bytes (as
// opposed to a rename); CheckKey makes those Incompatible.
func (c *checker) add(p fieldPath, old, new, rule string, v Verdict, encoding bool) {
	if c.key && encoding {
		rule = "state keys must encode identically; " + rule
		v = Incompatible
	}
	c.out.Reasons = append(c.out.Reasons, Reason{Path: c.path(p), Old: old, New: new, Rule: rule, Verdict: v})
	if v > c.out.Verdict {
		c.out.Verdict = v
	}
}

func (c *checker) message(p fieldPath, om, nm *Message) {
	pair := [2]string{om.Name, nm.Name}
	if c.seen[pair] {
		return
	}
	c.seen[pair] = true

	nums := make([]uint32, 0, len(om.Fields)+len(nm.Fields))
	for _, f := range om.Fields {
		nums = append(nums, f.Number)
	}
	for _, f := range nm.Fields {
		if om.Field(f.Number) == nil {
			nums = append(nums, f.Number)
		}
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })

	for _, num := range nums {
		of, nf := om.Field(num), nm.Field(num)
		switch {
		case nf == nil:
			fp := p.child(of.Name, num)
			if nm.IsReserved(num) {
				c.add(fp, describeField(of), "reserved", fmt.Sprintf("field removed and its number reserved in %s; old values are skipped", nm.Name), AsIs, true)
			} else {
				c.add(fp, describeField(of), "absent", fmt.Sprintf("field removed; old values are skipped (reserve number %d so it is not reused)", num), AsIs, true)
			}
		case of == nil:
			fp := p.child(nf.Name, num)
			if om.IsReserved(num) {
				c.add(fp, "reserved", describeField(nf), fmt.Sprintf("number %d is reserved in old message %s: data of the field removed from it would be read as the new field", num, om.Name), Incompatible, true)
			} else {
				c.add(fp, "absent", describeField(nf), "field added; old data reads it as its zero value", AsIs, true)
			}
			c.reservedName(fp, om, nf)
		default:
			fp := p.child(nf.Name, num)
			if of.Name != nf.Name {
				c.add(fp, of.Name, nf.Name, fmt.Sprintf("field %d renamed from %s to %s; the binary encoding does not carry names", num, of.Name, nf.Name), AsIs, false)
				c.reservedName(fp, om, nf)
			}
			c.field(fp, of, nf)
			c.oneofMove(fp, om, nm, of, nf)
		}
	}
	c.oneofGroups(p, om, nm)
}

// oneofSources returns, for oneof g of the new message nm, the oneofs of the
// old message om that its members were in, and the numbers of its members
// that om had outside any oneof.
func oneofSources(om, nm *Message, g string) (groups []string, outside []uint32) {
	for _, f := range nm.Fields {
		if f.Oneof != g {
			continue
		}
		switch of := om.Field(f.Number); {
		case of == nil:
		case of.Oneof == "":
			outside = append(outside, f.Number)
		case !slices.Contains(groups, of.Oneof):
			groups = append(groups, of.Oneof)
		}
	}
	return groups, outside
}

// oneofMove reports a field that moved into, out of or between oneofs, by
// protobuf's rules: a single field may move into a new oneof; fields that
// move into an existing oneof, or several fields into a new one, lose all
// but the last value on the wire when old data set more than one of them.
// Moving out of a oneof reads old data as it is (it has at most one member
// set); data written after the move may set several, which the old type
// reads as one, and Check(new, old) reports that as a move into a oneof.
func (c *checker) oneofMove(p fieldPath, om, nm *Message, of, nf *Field) {
	report := func(rule string, v Verdict) { c.add(p, describeField(of), describeField(nf), rule, v, true) }
	switch {
	case of.Oneof == nf.Oneof && of.Oneof == "":
	case nf.Oneof == "":
		report(fmt.Sprintf("moved out of oneof %s: old values read as they are, since at most one member was set", of.Oneof), AsIs)
	case of.Oneof == "":
		groups, outside := oneofSources(om, nm, nf.Oneof)
		switch {
		case len(groups) > 0:
			report(fmt.Sprintf("moved into oneof %s, which holds members of old oneof %s: old values that set this field and one of them keep only the one written last",
				nf.Oneof, strings.Join(groups, " and ")), Incompatible)
		case len(outside) > 1:
			report(fmt.Sprintf("moved into the new oneof %s with %s: old values that set more than one of them keep only the one written last",
				nf.Oneof, plural(len(outside)-1, "other field")), Incompatible)
		default:
			report(fmt.Sprintf("moved into the new oneof %s, alone: old values read as they are", nf.Oneof), AsIs)
		}
	default:
		if groups, _ := oneofSources(om, nm, nf.Oneof); len(groups) > 1 {
			report(fmt.Sprintf("oneofs %s merged into %s: old values that set a member of each keep only the one written last",
				strings.Join(groups, " and "), nf.Oneof), Incompatible)
		}
	}
}

// oneofGroups reports oneofs renamed, and oneofs declared in another order,
// which changes the order protobuf writes their members in but not what
// reads them.
func (c *checker) oneofGroups(p fieldPath, om, nm *Message) {
	// The new oneofs that each old one's members went to, when it was their
	// only source.
	into := map[string][]string{}
	for _, g := range nm.Oneofs {
		if groups, outside := oneofSources(om, nm, g); len(groups) == 1 && len(outside) == 0 {
			into[groups[0]] = append(into[groups[0]], g)
		}
	}
	for _, h := range om.Oneofs {
		switch gs := into[h]; {
		case len(gs) > 1:
			c.add(p, "oneof "+h, "oneofs "+strings.Join(gs, " and "), fmt.Sprintf("oneof %s split into %s: old values read as they are, since at most one member was set", h, strings.Join(gs, " and ")), AsIs, true)
		case len(gs) == 1 && gs[0] != h:
			c.add(p, "oneof "+h, "oneof "+gs[0], fmt.Sprintf("oneof %s renamed to %s; the binary encoding does not carry names", h, gs[0]), AsIs, false)
		}
	}
	last := -1 // the highest old position of the oneofs so far
	for j, g := range nm.Oneofs {
		groups, outside := oneofSources(om, nm, g)
		if len(groups) != 1 || len(outside) > 0 || len(into[groups[0]]) > 1 {
			continue // new, split, or reported field by field
		}
		i := slices.Index(om.Oneofs, groups[0])
		if i < last {
			c.add(p, fmt.Sprintf("oneof %s declared %s", groups[0], ordinal(i)), fmt.Sprintf("oneof %s declared %s", g, ordinal(j)),
				"oneofs declared in another order: members are written in declaration order, so the bytes change; values read as they are", AsIs, true)
		}
		last = max(last, i)
	}
}

// reservedName reports a new field that takes a name the old message reserved.
func (c *checker) reservedName(p fieldPath, om *Message, nf *Field) {
	for _, name := range om.ReservedNames {
		if name == nf.Name {
			c.add(p, "reserved", describeField(nf), fmt.Sprintf("name %s is reserved in old message %s: a removed field had it, and readers by name would confuse the two", name, om.Name), Incompatible, true)
			return
		}
	}
}

// elem is one element of a field: the field's value, or a map's key.
type elem struct {
	kind  Kind
	bits  uint32
	typ   string
	codec *CodecState
}

func valueElem(f *Field) elem { return elem{f.Kind, f.Bits, f.Type, f.Codec} }
func keyElem(f *Field) elem   { return elem{kind: f.MapKey, bits: f.KeyBits} }

func (c *checker) field(p fieldPath, of, nf *Field) {
	oldDesc, newDesc := describeField(of), describeField(nf)
	report := func(rule string, v Verdict) { c.add(p, oldDesc, newDesc, rule, v, true) }

	oc, nc := of.Card, nf.Card
	switch {
	case oc == Map && nc == Map:
		c.compareElem(p, oldDesc, newDesc, "map key: ", keyElem(of), keyElem(nf))
	case oc == Map || nc == Map:
		what := func(card Cardinality) string {
			if card == Repeated {
				return "a repeated field"
			}
			return "a scalar"
		}
		if oc == Map {
			report("a map turned into "+what(nc)+"; old map entries cannot be read as it", Incompatible)
		} else {
			report(what(oc)+" turned into a map; old values cannot be read as map entries", Incompatible)
		}
		return // the elements mean different things
	case oc == Repeated && nc != Repeated:
		switch {
		case packable(of.Kind):
			report(fmt.Sprintf("repeated %s is written packed, and a %s field cannot read a packed run", of.Kind, nc), Incompatible)
		case packable(nf.Kind):
			// The kind change below changes the wire type.
		case isMessageLike(of.Kind) && isMessageLike(nf.Kind):
			report(fmt.Sprintf("repeated to %s: the old elements are merged into one message", nc), AfterMigration)
		default:
			report(fmt.Sprintf("repeated to %s: only the last old element is kept", nc), AfterMigration)
		}
	case oc != Repeated && nc == Repeated:
		if packable(of.Kind) != packable(nf.Kind) {
			break // the kind change below changes the wire type
		}
		// Repeated numbers are written packed but read unpacked too.
		report(fmt.Sprintf("%s to repeated: an old value becomes a list of one element, and an unset or zero value an empty list", oc), AfterMigration)
	case oc != nc:
		rule := "singular to optional: old zero values, which were not written, read as unset"
		if oc == Optional {
			rule = "optional to singular: old explicitly set zero values read as zero"
		}
		report(rule, AsIs)
	}
	prefix := ""
	if oc == Map && nc == Map {
		prefix = "map value: "
	}
	c.compareElem(p, oldDesc, newDesc, prefix, valueElem(of), valueElem(nf))
}

// packable reports whether elements of kind k are numbers (varint or fixed
// wire types), which repeated fields write packed.
func packable(k Kind) bool { return k.WireType() != wireBytes }

// compareElem compares the kinds of two elements at p. oldDesc and newDesc describe
// the whole fields; prefix says which element of a map is compared.
func (c *checker) compareElem(p fieldPath, oldDesc, newDesc, prefix string, o, n elem) {
	report := func(rule string, v Verdict) { c.add(p, oldDesc, newDesc, prefix+rule, v, true) }
	if o.kind == n.kind {
		switch o.kind {
		case KindMessage:
			if o.typ != n.typ && !c.seen[[2]string{o.typ, n.typ}] {
				// Reported once, where the pair is first compared.
				c.add(p, oldDesc, newDesc, fmt.Sprintf("message %s renamed to %s; the binary encoding does not carry names", o.typ, n.typ), AsIs, false)
			}
			om, nm := c.old.Message(o.typ), c.new.Message(n.typ)
			switch {
			case om == nil:
				report("the old schema lacks message "+strconv.Quote(o.typ), Incompatible)
			case nm == nil:
				report("the new schema lacks message "+strconv.Quote(n.typ), Incompatible)
			default:
				c.message(p, om, nm)
			}
		case KindEnum:
			if o.typ != n.typ {
				c.add(p, oldDesc, newDesc, fmt.Sprintf("enum %s renamed to %s; the binary encoding does not carry names", o.typ, n.typ), AsIs, false)
			}
		case KindCustom:
			c.codec(report, o.codec, n.codec)
		default:
			ob, nb := goBits(o), goBits(n)
			switch {
			case nb < ob:
				report(fmt.Sprintf("narrowing Go %s to %s: decoding fails on old values outside the narrower range", goIntName(o.kind, ob), goIntName(n.kind, nb)), AfterMigration)
			case nb > ob:
				report(fmt.Sprintf("widening Go %s to %s reads every old value unchanged", goIntName(o.kind, ob), goIntName(n.kind, nb)), AsIs)
			}
		}
		return
	}
	v, rule := kindChange(o.kind, n.kind)
	report(rule, v)
}

// codec compares the custom codecs of two elements of kind Custom.
func (c *checker) codec(report func(string, Verdict), o, n *CodecState) {
	switch {
	case o == nil || n == nil:
		report("a custom field without a recorded codec cannot be checked", Incompatible)
	case o.Name != n.Name:
		report(fmt.Sprintf("codec %s replaced by codec %s, which cannot be assumed to read the old bytes", o.Name, n.Name), Incompatible)
	case o.Version != n.Version:
		if hasMigration(o.Name, o.Version) {
			report(fmt.Sprintf("codec %s changed from version %d to %d; the migration registered from version %d reads the old bytes", o.Name, o.Version, n.Version, o.Version), AfterMigration)
		} else {
			report(fmt.Sprintf("codec %s changed from version %d to %d and no migration from version %d is registered (serde.RegisterMigration)", o.Name, o.Version, n.Version, o.Version), Incompatible)
		}
	default:
		if changed, why := sampleChanged(o); changed {
			report(fmt.Sprintf("codec %s v%d: byte layout changed without a version bump: %s", o.Name, o.Version, why), Incompatible)
		}
	}
}

// varint classes of integer-like kinds.
const (
	vNone = iota
	vBool
	vEnum
	vSigned   // int32, int64: plain varint, two's complement
	vUnsigned // uint32, uint64
	vZigzag   // sint32, sint64
)

func varintClass(k Kind) (class int, width uint32) {
	switch k {
	case KindBool:
		return vBool, 1
	case KindEnum:
		return vEnum, 32
	case KindInt32:
		return vSigned, 32
	case KindInt64:
		return vSigned, 64
	case KindUint32:
		return vUnsigned, 32
	case KindUint64:
		return vUnsigned, 64
	case KindSint32:
		return vZigzag, 32
	case KindSint64:
		return vZigzag, 64
	}
	return vNone, 0
}

func isTimeKind(k Kind) bool { return k == KindTimestamp || k == KindDuration }

func isMessageLike(k Kind) bool { return k == KindMessage || isTimeKind(k) }

// kindChange is the verdict on reading elements of kind o as kind n, o != n.
func kindChange(o, n Kind) (Verdict, string) {
	if o <= KindInvalid || int(o) >= len(kindNames) || n <= KindInvalid || int(n) >= len(kindNames) {
		return Incompatible, fmt.Sprintf("unknown kind in %s to %s", o, n)
	}
	ow, nw := o.WireType(), n.WireType()
	wireChange := func(note string) (Verdict, string) {
		return Incompatible, fmt.Sprintf("%s to %s changes the wire type from %s to %s%s", o, n, wireName(ow), wireName(nw), note)
	}
	switch {
	case o == KindCustom || n == KindCustom:
		if o == KindCustom {
			return Incompatible, fmt.Sprintf("a custom codec's bytes cannot be read as %s", n)
		}
		return Incompatible, fmt.Sprintf("a custom codec cannot be assumed to read %s", o)
	case (o == KindFloat || o == KindDouble) && (n == KindFloat || n == KindDouble):
		return wireChange("; float and double cannot read each other")
	case ow != nw:
		note := ""
		if (o == KindFixed32 && n == KindFixed64) || (o == KindSfixed32 && n == KindSfixed64) {
			note = "; unlike varints, fixed-width integers do not widen"
		}
		return wireChange(note)
	case o == KindFloat || o == KindDouble || n == KindFloat || n == KindDouble:
		return Incompatible, fmt.Sprintf("%s to %s reads the bits of floating-point numbers as integers or the reverse", o, n)
	}

	switch ow {
	case wireFixed32, wireFixed64: // fixedN <-> sfixedN
		return AfterMigration, fmt.Sprintf("%s to %s reinterprets the sign: negative values become large positive ones and back", o, n)
	case wireBytes:
		switch {
		case o == KindString && n == KindBytes:
			return AfterMigration, "string to bytes: the values are read as their UTF-8 bytes"
		case o == KindBytes && n == KindString:
			return AfterMigration, "bytes to string: old values that are not valid UTF-8 fail to decode"
		case o == KindBytes:
			return AfterMigration, fmt.Sprintf("bytes to %s: the old bytes are parsed as a message and may not be one", n)
		case n == KindBytes:
			return AfterMigration, fmt.Sprintf("%s to bytes: the old messages are read as their raw bytes", o)
		case o == KindString || n == KindString:
			return Incompatible, fmt.Sprintf("%s to %s: text and messages cannot be read as each other", o, n)
		case isTimeKind(o) && isTimeKind(n):
			return Incompatible, fmt.Sprintf("%s to %s: timestamps and durations mean different things", o, n)
		case isMessageLike(o) && isMessageLike(n):
			return Incompatible, fmt.Sprintf("%s to %s: a well-known type and a message are not checked for the same shape", o, n)
		}
		return Incompatible, fmt.Sprintf("%s cannot be read as %s", o, n)
	}

	// Varints.
	oc, owid := varintClass(o)
	nc, nwid := varintClass(n)
	switch {
	case oc == vBool:
		one := "1"
		if nc == vZigzag {
			one = "-1"
		}
		return AfterMigration, fmt.Sprintf("bool to %s reinterprets values: false and true read as 0 and %s", n, one)
	case nc == vBool:
		return AfterMigration, fmt.Sprintf("%s to bool reinterprets values: every non-zero value reads as true", o)
	}
	var effects []string
	switch {
	case oc == vEnum:
		effects = append(effects, fmt.Sprintf("enum to int: enum numbers are read as plain %s values", n))
	case nc == vEnum:
		effects = append(effects, fmt.Sprintf("int to enum: %s values are read as enum numbers, which may be undefined", o))
	}
	if nwid < owid {
		effects = append(effects, fmt.Sprintf("narrowing %s to %s may truncate values", o, n))
	}
	plainSigned := func(cl int) bool { return cl == vSigned || cl == vEnum }
	switch {
	case (oc == vZigzag) != (nc == vZigzag):
		effects = append(effects, fmt.Sprintf("%s to %s mixes zigzag and plain varints, which reinterpret each other's values", o, n))
	case oc == vUnsigned && plainSigned(nc) && nwid > owid:
		// uint32 to int64 (or enum widening): every old value fits.
	case (oc == vUnsigned) != (nc == vUnsigned):
		effects = append(effects, fmt.Sprintf("%s to %s reinterprets the sign: negative values become large positive ones and back", o, n))
	}
	if len(effects) == 0 {
		return AsIs, fmt.Sprintf("widening %s to %s reads every old value unchanged", o, n)
	}
	return AfterMigration, strings.Join(effects, "; ")
}

func wireName(wt int) string {
	switch wt {
	case wireVarint:
		return "varint"
	case wireFixed32:
		return "fixed32"
	case wireFixed64:
		return "fixed64"
	case wireBytes:
		return "length-delimited"
	}
	return "wire type " + strconv.Itoa(wt)
}

// naturalBits is the width of integer kind k, or 0 for other kinds.
func naturalBits(k Kind) uint32 {
	switch k {
	case KindInt32, KindUint32, KindSint32, KindFixed32, KindSfixed32, KindEnum:
		return 32
	case KindInt64, KindUint64, KindSint64, KindFixed64, KindSfixed64:
		return 64
	}
	return 0
}

// goBits is the Go width of an integer element; schemas without it get the
// kind's width.
func goBits(e elem) uint32 {
	if e.bits != 0 {
		return e.bits
	}
	return naturalBits(e.kind)
}

func goIntName(k Kind, bits uint32) string {
	switch k {
	case KindUint32, KindUint64, KindFixed32, KindFixed64:
		return "uint" + strconv.Itoa(int(bits))
	}
	return "int" + strconv.Itoa(int(bits))
}

// describeElem writes an element in proto spelling, with the Go width of
// integers narrower than their kind and the codec of custom kinds.
func describeElem(e elem) string {
	switch e.kind {
	case KindMessage:
		if e.typ != "" {
			return e.typ
		}
	case KindEnum:
		if e.typ != "" {
			return "enum " + e.typ
		}
	case KindCustom:
		if e.codec != nil {
			return fmt.Sprintf("codec %s v%d", e.codec.Name, e.codec.Version)
		}
	}
	s := e.kind.String()
	if nat := naturalBits(e.kind); nat != 0 && e.bits != 0 && e.bits != nat {
		s += " (Go " + goIntName(e.kind, e.bits) + ")"
	}
	return s
}

// describeField writes a field's type in proto spelling, e.g.
// "repeated int64" or "map<string, Money>".
func describeField(f *Field) string {
	v := describeElem(valueElem(f))
	if f.Oneof != "" {
		return v + " (oneof " + f.Oneof + ")"
	}
	switch f.Card {
	case Optional:
		return "optional " + v
	case Repeated:
		return "repeated " + v
	case Map:
		return "map<" + describeElem(keyElem(f)) + ", " + v + ">"
	}
	return v
}
