package transform

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// Version names what Deadline writes: a cache of its output keys by it, and
// it changes whenever the output for some module would.
const Version = 8

// Period is how many turns pass between two ticks. A tick calls the host,
// which checks the call's deadline and yields the goroutine: two ticks are
// some microseconds apart, and one costs a few hundred nanoseconds.
//
// Each place that counts weighs the work it stands for, so that no work goes
// uncounted however it is shaped, and no turn stands for more than a
// microsecond or so of it, whatever its instructions (but for the kernel's
// faults of the pages a store or load touches first, which no count can
// tell from its neighbours', 3 to 30 µs each here): a loop header 1 turn
// plus one per 1<<CodeShift units of the loop's body (a byte of code is a
// unit, a load or store and a slow instruction more, see AccessShift and
// SlowShift), one per call in it and one per instruction that leaves the
// compiled code for the engine's own Go (ExitWeight); a function's entry
// likewise for its body outside loops; a bulk operation 1 plus one per
// 1<<BulkShift bytes or entries.
const Period = 1 << 14

// BulkShift weighs bulk operations (memory.fill, memory.copy, memory.init and
// the table's): one turn, and one more per 1<<BulkShift bytes or entries, so
// that a loop of fills ticks as often as its work asks, however short each.
// What a byte asks is most when its page is written for the first time: the
// kernel's fault and zeroing of a 4 KiB page take 3 to 30 µs here, and a
// Period of turns of 1<<BulkShift bytes is then 4 MiB of fresh pages, some
// 30 ms, where it was 64 MiB and half a second.
const BulkShift = 8

// BulkChunk is the most bytes one memory.fill, memory.copy or memory.init
// writes between two counts: a longer one, which as one instruction would
// run its whole length past any check before it (a fill of 128 MiB of fresh
// memory, half a second past a deadline), is cut into operations of
// BulkChunk bytes, counted each, by a function the rewrite adds. The cut
// keeps the instruction's meaning: when any byte of it is out of bounds it
// traps before writing one, and a copy over its own source runs in the
// direction that reads every byte before it is written.
const BulkChunk = 64 << 10

// CodeShift weighs code: one turn per 1<<CodeShift units of a loop's or a
// function's body, a byte of code a unit: a few hundred instructions, which
// run in a microsecond or less, however chosen, but for the loads, stores and
// slow instructions that weigh more. A function whose body weighs less, and
// that calls none, ends within that and is not counted at its entry: that
// keeps the count off the small leaf functions compilers call in inner
// loops; a call of one is a turn of its caller's count instead.
const CodeShift = 10

// AccessShift weighs loads and stores: one turn per 1<<AccessShift of them
// in a loop's or a function's body. An access that misses every cache and
// the TLB costs hundreds of nanoseconds (700 ns here, chasing pointers
// through 64 MiB on a loaded machine), so that a loop of 32 such loads, one
// turn by its bytes and as many as weighed before, ticked 190 ms apart.
const AccessShift = 2

// SlowShift weighs the slow instructions (isSlow): one turn per
// 1<<SlowShift of them. A square root, a division, a rounding or a
// conversion that checks its input takes 5 to 25 ns, as long as 5 to 25
// bytes of other code: a leaf of 1 KiB of square roots, one turn by its
// bytes, took 23 µs, and a loop of its calls ticked 200 ms apart.
const SlowShift = 5

// ExitWeight is what memory.grow, table.grow and ref.func weigh, each: the
// engine leaves the compiled code for its own Go to do them, which takes
// 60 to 450 ns, as a call does (a leaf of 1 KiB of ref.func, one turn by its
// bytes, took 150 µs, and a loop of its calls ticked 1.2 s apart).
const ExitWeight = 1

// CounterExport is the name Deadline exports its counter under, so that the
// host can set it back between calls: what one call leaves of it would
// tell the next when its first tick falls. A module that exports the name
// itself is not rewritten.
const CounterExport = "berm.deadline.count"

// TickModule and TickName are the import Deadline adds: a function of no
// parameters and no results that the host provides. A program cannot import
// it itself, since a deploy refuses every import from berm but berm.syscall.
const (
	TickModule = "berm"
	TickName   = "deadline"
)

// ErrUnsupported is a module Deadline does not rewrite: one it cannot read in
// full, which wazero either refuses too or (a gap in the walker) runs as it
// is on the plain path.
var ErrUnsupported = errors.New("transform: module not rewritten")

// Deadline returns module with a counter global, counted down (by the
// weights Period describes) at every loop header, at the entry of every
// function that calls another or whose body weighs more than a turn, and at
// every bulk operation whose length is not a small constant, and a call of
// the import berm.deadline whenever it runs out. A function with loops keeps
// the counter in a local between its calls. A memory.fill, memory.copy or
// memory.init longer than BulkChunk runs in a function the rewrite adds,
// BulkChunk bytes at a time. The counter is exported as CounterExport.
//
// The import comes after the module's own, so every function the module
// defines moves up by one index: every place that names one is rewritten.
// The functions the rewrite adds come after the module's own.
func Deadline(module []byte) (_ []byte, err error) {
	defer func() {
		// A bug here must cost a program its speed, not its deploy.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrUnsupported, p)
		}
	}()
	out, err := deadline(module)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return out, nil
}

func deadline(module []byte) ([]byte, error) {
	if !bytes.HasPrefix(module, []byte(wasmbin.Header)) {
		return nil, errors.New("not a core module")
	}
	var all []wasmbin.Section
	var sections [wasmbin.SectionTag + 1]*wasmbin.Section
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return nil, err
		}
		all = append(all, s)
	}
	for i, s := range all {
		if s.ID == wasmbin.SectionCustom {
			continue
		}
		if s.ID > wasmbin.SectionTag || sections[s.ID] != nil {
			return nil, fmt.Errorf("section %d unknown or repeated", s.ID)
		}
		sections[s.ID] = &all[i]
	}
	payload := func(id byte) []byte {
		if s := sections[id]; s != nil {
			return s.Payload
		}
		return nil
	}

	types, err := readTypes(payload(wasmbin.SectionType))
	if err != nil {
		return nil, err
	}
	imp, err := readImports(payload(wasmbin.SectionImport))
	if err != nil {
		return nil, err
	}
	imports, funcs, globals := imp.section, imp.funcs, imp.globals
	funcTypes, err := readFunctions(payload(wasmbin.SectionFunction))
	if err != nil {
		return nil, err
	}
	long, err := longPassive(payload(wasmbin.SectionData))
	if err != nil {
		return nil, err
	}
	// The tick is the last function import; the functions the module
	// defines come after it, and those the rewrite adds after them.
	m := &rewriter{tick: funcs, defined: uint32(len(funcTypes)), types: &types, long: long}
	imports.count++
	imports.entries = wasmbin.AppendName(imports.entries, TickModule)
	imports.entries = wasmbin.AppendName(imports.entries, TickName)
	imports.entries = append(imports.entries, 0x00)
	imports.entries = wasmbin.AppendULEB(imports.entries, uint64(types.index(sigTick)))
	global, err := m.globals(payload(wasmbin.SectionGlobal))
	if err != nil {
		return nil, err
	}
	m.counter = globals + global.count - 1
	replaced := map[byte][]byte{
		wasmbin.SectionImport: imports.encode(),
		wasmbin.SectionGlobal: global.encode(),
	}
	if replaced[wasmbin.SectionExport], err = m.exports(payload(wasmbin.SectionExport)); err != nil {
		return nil, err
	}
	if p := payload(wasmbin.SectionStart); p != nil {
		r := wasmbin.NewReader(p)
		start := r.U32()
		if !r.Done() {
			return nil, errors.New("start section")
		}
		replaced[wasmbin.SectionStart] = wasmbin.AppendULEB(nil, uint64(m.shift(start)))
	}
	if p := payload(wasmbin.SectionElement); p != nil {
		if replaced[wasmbin.SectionElement], err = m.elements(p); err != nil {
			return nil, err
		}
	}
	if p := payload(wasmbin.SectionCode); p != nil {
		paramsOf := func(i int) (uint32, error) {
			if i >= len(funcTypes) || int(funcTypes[i]) >= len(types.params) {
				return 0, fmt.Errorf("function %d: no type", i)
			}
			return types.params[funcTypes[i]], nil
		}
		if replaced[wasmbin.SectionCode], err = m.code(p, paramsOf); err != nil {
			return nil, err
		}
	}
	if len(m.added) > 0 {
		functions := vector{count: uint32(len(funcTypes) + len(m.added))}
		for _, t := range funcTypes {
			functions.entries = wasmbin.AppendULEB(functions.entries, uint64(t))
		}
		for _, f := range m.added {
			functions.entries = wasmbin.AppendULEB(functions.entries, uint64(types.index(f.signature())))
		}
		replaced[wasmbin.SectionFunction] = functions.encode()
	}
	replaced[wasmbin.SectionType] = types.encode()

	b := make([]byte, 0, len(module)+len(module)/8+64)
	b = append(b, wasmbin.Header...)
	// Sections keep their order; the type, import, function, global and
	// export sections, when the module has none, go where the format
	// orders them.
	added := map[byte]bool{}
	addBefore := func(rank int) {
		for _, id := range []byte{wasmbin.SectionType, wasmbin.SectionImport, wasmbin.SectionFunction, wasmbin.SectionGlobal, wasmbin.SectionExport} {
			if p, ok := replaced[id]; ok && sections[id] == nil && !added[id] && order(id) < rank {
				b = wasmbin.AppendSection(b, id, p)
				added[id] = true
			}
		}
	}
	for _, s := range all {
		if s.ID != wasmbin.SectionCustom {
			addBefore(order(s.ID))
		}
		if s.ID == wasmbin.SectionCustom {
			b = m.custom(b, module[s.Start:s.End], s.Payload)
			continue
		}
		if p, ok := replaced[s.ID]; ok {
			b = wasmbin.AppendSection(b, s.ID, p)
		} else {
			b = append(b, module[s.Start:s.End]...)
		}
	}
	addBefore(order(wasmbin.SectionData) + 1)
	if names := m.names(); !m.named && names != nil {
		b = wasmbin.AppendSection(b, wasmbin.SectionCustom, names)
	}
	return b, nil
}

// order is a section's place in the order the format requires: tag between
// memory and global, data count between element and code.
func order(id byte) int {
	return [...]int{
		wasmbin.SectionType: 1, wasmbin.SectionImport: 2, wasmbin.SectionFunction: 3,
		wasmbin.SectionTable: 4, wasmbin.SectionMemory: 5, wasmbin.SectionTag: 6,
		wasmbin.SectionGlobal: 7, wasmbin.SectionExport: 8, wasmbin.SectionStart: 9,
		wasmbin.SectionElement: 10, wasmbin.SectionDataCount: 11, wasmbin.SectionCode: 12,
		wasmbin.SectionData: 13,
	}[id]
}

// vector is a section's payload as a count and the entries' bytes.
type vector struct {
	count   uint32
	entries []byte
}

func (v vector) encode() []byte {
	return append(wasmbin.AppendULEB(nil, uint64(v.count)), v.entries...)
}

// Signatures of the functions the rewrite imports or adds, as the type
// section writes them.
const (
	sigTick   = "\x60\x00\x00"             // the tick: () -> ()
	sigWeight = "\x60\x01\x7f\x00"         // the count function: (i32) -> ()
	sigBulk   = "\x60\x03\x7f\x7f\x7f\x00" // the bulk functions, and their sites' if: (i32 i32 i32) -> ()
)

// typeSection is the module's type section, and the types the rewrite
// appends to it (appended, so that no type index moves).
type typeSection struct {
	vector
	params []uint32          // the number of parameters of each type
	first  map[string]uint32 // the first index of each signature the rewrite uses
}

// index returns the index of a type of signature sig, appending one when
// the module has none.
func (t *typeSection) index(sig string) uint32 {
	if i, ok := t.first[sig]; ok {
		return i
	}
	i := t.count
	t.count++
	t.entries = append(t.entries[:len(t.entries):len(t.entries)], sig...)
	t.params = append(t.params, uint32(sig[1]))
	t.first[sig] = i
	return i
}

// readTypes returns the type section, with the number of parameters of each
// type and where the signatures the rewrite uses are.
func readTypes(payload []byte) (typeSection, error) {
	r := wasmbin.NewReader(payload)
	t := typeSection{first: map[string]uint32{}}
	if payload == nil {
		return t, nil
	}
	t.count = uint32(r.Count())
	t.entries = payload[r.Offset():]
	for i := range t.count {
		at := r.Offset()
		if form := r.Byte(); form != 0x60 {
			return typeSection{}, fmt.Errorf("type %d: form 0x%02x", i, form)
		}
		n := uint32(r.Count())
		for range n {
			wasmbin.SkipValueType(r)
		}
		for range r.Count() {
			wasmbin.SkipValueType(r)
		}
		sig := string(payload[at:r.Offset()])
		if _, ok := t.first[sig]; !ok && r.Err() == nil {
			t.first[sig] = i
		}
		t.params = append(t.params, n)
	}
	if !r.Done() {
		return typeSection{}, errors.New("type section")
	}
	return t, nil
}

// longPassive returns the passive data segments of a data section longer
// than BulkChunk, by index: those a memory.init can copy more than
// BulkChunk bytes of without trapping.
func longPassive(payload []byte) (map[uint32]bool, error) {
	long := map[uint32]bool{}
	if payload == nil {
		return long, nil
	}
	r := wasmbin.NewReader(payload)
	n := r.Count()
	for i := range n {
		flags := r.U32()
		switch flags {
		case 0: // active, memory 0
			if err := r.SkipConstExpr(); err != nil {
				return nil, fmt.Errorf("data segment %d: %w", i, err)
			}
		case 1: // passive
		case 2: // active, a memory
			r.U32()
			if err := r.SkipConstExpr(); err != nil {
				return nil, fmt.Errorf("data segment %d: %w", i, err)
			}
		default:
			return nil, fmt.Errorf("data segment %d: flags %d", i, flags)
		}
		size := r.U32()
		r.Bytes(size)
		if flags == 1 && size > BulkChunk {
			long[uint32(i)] = true
		}
	}
	if !r.Done() {
		return nil, errors.New("data section")
	}
	return long, nil
}

// imports is what a module's import section holds that the rewrites need:
// the section, to append to, and how many functions and globals it imports,
// which come first in their index spaces.
type imports struct {
	section        vector
	funcs, globals uint32
	memory         bool // a memory is imported
}

func readImports(payload []byte) (imports, error) {
	var imp imports
	if payload == nil {
		return imp, nil
	}
	r := wasmbin.NewReader(payload)
	imp.section.count = uint32(r.Count())
	imp.section.entries = append(imp.section.entries, payload[r.Offset():]...)
	for range imp.section.count {
		r.Name()
		r.Name()
		switch kind := r.Byte(); kind {
		case 0x00: // function: a type
			r.U32()
			imp.funcs++
		case 0x01: // table: a reference type, limits
			wasmbin.SkipValueType(r)
			skipLimits(r)
		case 0x02: // memory
			skipLimits(r)
			imp.memory = true
		case 0x03: // global: a value type, mutability
			wasmbin.SkipValueType(r)
			r.Byte()
			imp.globals++
		case 0x04: // tag: an attribute, a type
			r.Byte()
			r.U32()
		default:
			return imports{}, fmt.Errorf("%w: import of kind %d", ErrUnsupported, kind)
		}
	}
	if !r.Done() {
		return imports{}, fmt.Errorf("%w: import section", ErrUnsupported)
	}
	return imp, nil
}

// readFunctions returns the type index of each function the module defines.
func readFunctions(payload []byte) ([]uint32, error) {
	if payload == nil {
		return nil, nil
	}
	r := wasmbin.NewReader(payload)
	types := make([]uint32, r.Count())
	for i := range types {
		types[i] = r.U32()
	}
	if !r.Done() {
		return nil, errors.New("function section")
	}
	return types, nil
}

func skipLimits(r *wasmbin.Reader) {
	flags := r.Byte()
	r.U64()
	if flags&0x01 != 0 {
		r.U64()
	}
}

// rewriter moves the module's function indices past the tick's, and counts.
type rewriter struct {
	tick    uint32 // the tick's function index: the first defined function's before
	counter uint32 // the counter's global index
	defined uint32 // how many functions the module defines
	types   *typeSection
	// long are the data segments a memory.init of which may be cut
	// (longPassive).
	long map[uint32]bool
	// added are the functions the rewrite adds, in order, after the
	// module's own: each the first time a body calls it.
	added []helper
	named bool // the module's name section is rewritten, with their names
}

// helper is a function the rewrite adds.
type helper struct {
	kind    byte   // helperCount, helperFill, helperCopy or helperInit
	segment uint32 // helperInit's data segment
}

const (
	// helperCount counts a weight, its parameter: count-dense functions
	// call it rather than count inline.
	helperCount = iota
	// helperFill, helperCopy and helperInit do a memory.fill, memory.copy
	// or memory.init (of one segment) of their parameters, counted, and
	// BulkChunk bytes at a time when it is longer.
	helperFill
	helperCopy
	helperInit
)

// name is what a name section calls h, or empty: the function that counts
// traps only at the deadline, which the host reports as such.
func (h helper) name() string {
	switch h.kind {
	case helperFill:
		return "berm.memory.fill"
	case helperCopy:
		return "berm.memory.copy"
	case helperInit:
		return "berm.memory.init." + strconv.FormatUint(uint64(h.segment), 10)
	}
	return ""
}

func (h helper) signature() string {
	if h.kind == helperCount {
		return sigWeight
	}
	return sigBulk
}

// helper returns the index of the function h, adding it the first time.
func (m *rewriter) helper(h helper) uint32 {
	i := 0
	for i < len(m.added) && m.added[i] != h {
		i++
	}
	if i == len(m.added) {
		m.added = append(m.added, h)
		// Its type, so that the type section is complete before any body
		// names it.
		m.types.index(h.signature())
	}
	return m.tick + 1 + m.defined + uint32(i)
}

// DenseCounts is how many places that count (loop headers and bulk
// operations) a function may have before it calls a function to count at
// each rather than count inline. wazero's optimizing compiler takes time
// more than linear in the blocks of a function, and the inline count adds
// two at each: a function of 10,000 loops took 4 to 8 times as long to
// compile, one of 20,000 fills 4 times. A call adds no block, and costs a
// few nanoseconds a turn, in functions that are far from a compute
// kernel's.
const DenseCounts = 256

// shift is where function index i is once the tick is imported.
func (m *rewriter) shift(i uint32) uint32 {
	if i >= m.tick {
		return i + 1
	}
	return i
}

func (m *rewriter) appendFunc(b []byte, i uint32) []byte {
	return wasmbin.AppendULEB(b, uint64(m.shift(i)))
}

// constExpr appends the constant expression r is at, up to its end, with
// its ref.func moved.
func (m *rewriter) constExpr(b, buf []byte, r *wasmbin.Reader) ([]byte, error) {
	for {
		at := r.Offset()
		op, err := wasmbin.SkipInstruction(r)
		if err != nil {
			return nil, err
		}
		if op == opRefFunc {
			b = m.appendFunc(append(b, op), wasmbin.NewReader(buf[at+1:]).U32())
		} else {
			b = append(b, buf[at:r.Offset()]...)
		}
		if op == opEnd {
			return b, nil
		}
	}
}

// globals returns the global section with its ref.func moved and the
// counter, a mutable i32 at Period, at its end.
func (m *rewriter) globals(payload []byte) (vector, error) {
	var v vector
	if payload != nil {
		r := wasmbin.NewReader(payload)
		v.count = uint32(r.Count())
		for range v.count {
			at := r.Offset()
			wasmbin.SkipValueType(r)
			r.Byte() // mutability
			v.entries = append(v.entries, payload[at:r.Offset()]...)
			var err error
			if v.entries, err = m.constExpr(v.entries, payload, r); err != nil {
				return vector{}, fmt.Errorf("global section: %w", err)
			}
		}
		if !r.Done() {
			return vector{}, errors.New("global section")
		}
	}
	v.count++
	v.entries = append(v.entries, 0x7f, 0x01, opI32Const)
	v.entries = append(wasmbin.AppendSLEB(v.entries, Period), opEnd)
	return v, nil
}

// exports returns the export section (payload, which may be empty) with its
// functions moved and the counter exported as CounterExport.
func (m *rewriter) exports(payload []byte) ([]byte, error) {
	r := wasmbin.NewReader(payload)
	n := 0
	if len(payload) > 0 {
		n = r.Count()
	}
	b := wasmbin.AppendULEB(make([]byte, 0, len(payload)+32), uint64(n+1))
	for range n {
		name := r.Name()
		if name == CounterExport {
			return nil, fmt.Errorf("export section: the module exports %s itself", CounterExport)
		}
		b = wasmbin.AppendName(b, name)
		kind := r.Byte()
		index := r.U32()
		b = append(b, kind)
		if kind == 0x00 {
			index = m.shift(index)
		}
		b = wasmbin.AppendULEB(b, uint64(index))
	}
	if !r.Done() {
		return nil, errors.New("export section")
	}
	b = append(wasmbin.AppendName(b, CounterExport), 0x03) // a global
	return wasmbin.AppendULEB(b, uint64(m.counter)), nil
}

// elements returns the element section with its functions moved: those of
// its function vectors and the ref.func of its expressions.
func (m *rewriter) elements(payload []byte) ([]byte, error) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	b := wasmbin.AppendULEB(make([]byte, 0, len(payload)+len(payload)/8), uint64(n))
	var err error
	for i := range n {
		flags := r.U32()
		if flags > 7 {
			return nil, fmt.Errorf("element segment %d: flags %d", i, flags)
		}
		b = wasmbin.AppendULEB(b, uint64(flags))
		if flags&0x03 == 0x02 { // an explicit table
			b = wasmbin.AppendULEB(b, uint64(r.U32()))
		}
		if flags&0x01 == 0 { // active: an offset
			if b, err = m.constExpr(b, payload, r); err != nil {
				return nil, fmt.Errorf("element segment %d: %w", i, err)
			}
		}
		if flags&0x03 != 0 { // an element kind, or a reference type
			at := r.Offset()
			if flags&0x04 == 0 {
				r.Byte()
			} else {
				wasmbin.SkipValueType(r)
			}
			b = append(b, payload[at:r.Offset()]...)
		}
		count := r.Count()
		b = wasmbin.AppendULEB(b, uint64(count))
		for range count {
			if flags&0x04 == 0 {
				b = m.appendFunc(b, r.U32())
			} else if b, err = m.constExpr(b, payload, r); err != nil {
				return nil, fmt.Errorf("element segment %d: %w", i, err)
			}
		}
	}
	if !r.Done() {
		return nil, errors.New("element section")
	}
	return b, nil
}

// custom appends a custom section to b: the "name" section with its
// function and local names moved and its label names (subsection 3)
// dropped, every other as it was: a label is named by its index among a
// function's blocks, which the ifs of the count move. A name section that
// does not read is dropped, which costs only readable traps.
func (m *rewriter) custom(b, section, payload []byte) []byte {
	r := wasmbin.NewReader(payload)
	if r.Name() != "name" || r.Err() != nil {
		return append(b, section...)
	}
	out := wasmbin.AppendName(nil, "name")
	// Whether the function names are in out: when the rewrite adds none
	// that has a name, there is nothing to add them for.
	functions := !m.namesAdded()
	appendSub := func(id byte, sub []byte) {
		out = append(out, id)
		out = wasmbin.AppendULEB(out, uint64(len(sub)))
		out = append(out, sub...)
	}
	for r.Len() > 0 {
		id := r.Byte()
		sub := r.Bytes(r.U32())
		if r.Err() != nil {
			return b
		}
		if id > 1 && !functions {
			appendSub(1, m.addedNames(wasmbin.AppendULEB(nil, 0)))
			functions = true
		}
		switch id {
		case 1: // function names: an index, a name
			if sub = m.nameMap(sub, false); sub != nil {
				sub = m.addedNames(sub)
				functions = true
			}
		case 2: // local names: a function index, a map of local names
			sub = m.nameMap(sub, true)
		case 3: // label names
			continue
		}
		if sub == nil {
			return b
		}
		appendSub(id, sub)
	}
	if !functions {
		appendSub(1, m.addedNames(wasmbin.AppendULEB(nil, 0)))
	}
	m.named = true
	return wasmbin.AppendSection(b, wasmbin.SectionCustom, out)
}

// names returns a name section of the names of the functions the rewrite
// adds alone, for a module that has none, or nil when it adds none.
func (m *rewriter) names() []byte {
	if !m.namesAdded() {
		return nil
	}
	out := append(wasmbin.AppendName(nil, "name"), 1)
	sub := m.addedNames(wasmbin.AppendULEB(nil, 0))
	return append(wasmbin.AppendULEB(out, uint64(len(sub))), sub...)
}

// addedNames returns the function name map sub with the names of the
// functions the rewrite adds after its own, whose indices are greater than
// any it names: so that a trap in one reads as what the program did, a
// memory.fill say, and not as a function the program does not have.
func (m *rewriter) addedNames(sub []byte) []byte {
	var names []byte
	n := 0
	for i, h := range m.added {
		if h.name() != "" {
			names = wasmbin.AppendULEB(names, uint64(m.tick+1+m.defined+uint32(i)))
			names = wasmbin.AppendName(names, h.name())
			n++
		}
	}
	if n == 0 {
		return sub
	}
	r := wasmbin.NewReader(sub)
	out := wasmbin.AppendULEB(make([]byte, 0, len(sub)+len(names)+5), uint64(r.U32())+uint64(n))
	return append(append(out, sub[r.Offset():]...), names...)
}

// namesAdded reports whether the rewrite adds a function with a name.
func (m *rewriter) namesAdded() bool {
	for _, h := range m.added {
		if h.name() != "" {
			return true
		}
	}
	return false
}

// nameMap moves the function indices of a name map (or, indirect, of a map
// of name maps), or returns nil when it does not read.
func (m *rewriter) nameMap(sub []byte, indirect bool) []byte {
	r := wasmbin.NewReader(sub)
	n := r.Count()
	b := wasmbin.AppendULEB(make([]byte, 0, len(sub)+8), uint64(n))
	for range n {
		b = m.appendFunc(b, r.U32())
		at := r.Offset()
		if indirect {
			for range r.Count() {
				r.U32()
				r.Name()
			}
		} else {
			r.Name()
		}
		b = append(b, sub[at:r.Offset()]...)
	}
	if !r.Done() {
		return nil
	}
	return b
}

// code returns the code section's payload with the count inserted and the
// function indices moved, and the functions the rewrite adds after the
// module's.
func (m *rewriter) code(payload []byte, params func(int) (uint32, error)) ([]byte, error) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	out := make([]byte, 0, len(payload)+len(payload)/4)
	var body []byte
	var edits []edit
	if uint32(n) != m.defined {
		return nil, fmt.Errorf("code section: %d bodies for %d functions", n, m.defined)
	}
	for i := range n {
		code := r.Bytes(r.U32())
		if r.Err() != nil {
			return nil, fmt.Errorf("code section: %w", r.Err())
		}
		p, err := params(i)
		if err != nil {
			return nil, err
		}
		body, edits, err = m.body(body[:0], code, p, edits[:0])
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = wasmbin.AppendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	if !r.Done() {
		return nil, errors.New("code section: bytes after the last body")
	}
	// A helper's body adds no helper: each counts in the global itself.
	for _, h := range m.added {
		body = m.helperBody(body[:0], h)
		out = wasmbin.AppendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	return append(wasmbin.AppendULEB(make([]byte, 0, len(out)+5), uint64(n+len(m.added))), out...), nil
}

// edit is a place in a function body where the rewrite writes.
type edit struct {
	at, end int    // the bytes replaced: empty for an insertion
	kind    byte   // editCount with weight, editBulk, editChunk with bulk, or editFunc with index
	index   uint32 // editFunc's
	weight  uint32
	work    work   // of a loop's count: what its body holds outside inner loops
	bulk    helper // editChunk's
}

// work is what a loop's body, or a function's outside its loops, holds that
// its bytes do not weigh.
type work struct {
	calls, exits, accesses, slow int
	bulk                         uint64 // turns: the bulk operations of constant length
}

func (w *work) add(v work) {
	w.calls += v.calls
	w.exits += v.exits
	w.accesses += v.accesses
	w.slow += v.slow
	w.bulk += v.bulk
}

// MaxStretch is the most turns code may weigh between two counts (loop
// headers, function entries) before a count is added in its middle: a loop
// header or an entry counts the whole of its body before it runs, so that a
// body of no loop of 32,000 stores to fresh pages ran 0.1 to 0.3 s with no
// check, and one of fills of 64 KiB, of known length, longer.
const MaxStretch = Period >> 4

// maxWeight bounds what one count weighs, so that the counter, at most
// Period, cannot pass the least i32 when it is taken down.
const maxWeight = 1 << 30

// weight is what n bytes of code holding w weigh: a turn, one per
// 1<<CodeShift units of its bytes, loads and stores and slow instructions
// together, and its calls, exits and bulk operations of constant length.
func (w work) weight(n int) uint32 {
	units := uint64(n) + uint64(w.accesses)<<(CodeShift-AccessShift) + uint64(w.slow)<<(CodeShift-SlowShift)
	turns := 1 + units>>CodeShift + uint64(w.calls) + uint64(w.exits)*ExitWeight + w.bulk
	return uint32(min(turns, maxWeight))
}

const (
	editCount = iota // count weight turns (inserted)
	editBulk         // count the length on the stack's top (inserted)
	editChunk        // a memory.fill, copy or init that may be cut (replaced)
	editFunc         // a function index (replaced)
	editStore        // give the global the counter a local holds (inserted)
	editLoad         // take the counter from the global into the local (inserted)
)

// body appends code, rewritten, to out; edits is scratch.
//
// A function with loops counts in a local of its own, which the compiler
// keeps in a register, rather than in the global, which is two loads and a
// store at every turn: the local takes the global's value at the entry and
// after every call, and gives it back before every call and every way out.
// A function with bulk operations of a length not constant gets one more
// local, an i32 that holds their length.
func (m *rewriter) body(out, code []byte, params uint32, edits []edit) ([]byte, []edit, error) {
	r := wasmbin.NewReader(code)
	groups := r.Count()
	afterGroups := r.Offset()
	locals := uint64(params)
	for range groups {
		locals += uint64(r.U32())
		wasmbin.SkipValueType(r)
	}
	if r.Err() != nil {
		return nil, nil, fmt.Errorf("locals: %w", r.Err())
	}
	start := r.Offset()
	calls, bulk := false, false
	counts, loops := 0, 0
	// The blocks open: for a loop, its edit, which its end weighs by the
	// bytes between and their work; -1 for a block or an if. A branch to
	// len(open) leaves the function.
	var open []int
	var outside work // the function's outside its loops
	// inner is the work of the innermost loop open, or the function's.
	inner := func() *work {
		for i := len(open) - 1; i >= 0; i-- {
			if e := open[i]; e >= 0 {
				return &edits[e].work
			}
		}
		return &outside
	}
	// What the code since the last count holds, and where it begins.
	var since work
	sinceAt := start
	// note adds to what the innermost loop, or the function, holds, and
	// to what the code since the last count does.
	note := func(add work) {
		inner().add(add)
		since.add(add)
	}
	prev := -1 // where the instruction before began
	for r.Len() > 0 {
		at := r.Offset()
		if w := since.weight(at - sinceAt); w > MaxStretch {
			// Code that weighs so much between two counts is counted
			// again in the middle, so that no body, however long, runs
			// more than MaxStretch turns unchecked.
			edits = append(edits, edit{at: at, end: at, kind: editCount, weight: w})
			counts++
			since, sinceAt = work{}, at
		}
		op, err := wasmbin.SkipInstruction(r)
		if err != nil {
			return nil, nil, err
		}
		ins := code[at:r.Offset()]
		if isAccess(ins) {
			note(work{accesses: 1})
		}
		if isSlow(ins) {
			note(work{slow: 1})
		}
		switch op {
		case opBlock, opIf:
			open = append(open, -1)
		case opLoop:
			open = append(open, len(edits))
			edits = append(edits, edit{at: r.Offset(), end: r.Offset(), kind: editCount, weight: 1})
			counts++
			loops++
			since, sinceAt = work{}, r.Offset()
		case opEnd:
			n := len(open)
			if n == 0 {
				edits = append(edits, edit{at: at, end: at, kind: editStore})
				break
			}
			if e := open[n-1]; e >= 0 {
				edits[e].weight = edits[e].work.weight(at - edits[e].at)
			}
			open = open[:n-1]
		case opReturn:
			edits = append(edits, edit{at: at, end: at, kind: editStore})
		case opBr, opBrIf, opBrTable:
			if leaves(ins, len(open)) {
				edits = append(edits, edit{at: at, end: at, kind: editStore})
			}
		case opCall, opReturnCall, opRefFunc:
			index := wasmbin.NewReader(code[at+1:]).U32()
			if op != opRefFunc {
				edits = append(edits, edit{at: at, end: at, kind: editStore})
			}
			edits = append(edits, edit{at: at + 1, end: r.Offset(), kind: editFunc, index: index})
			if op == opCall {
				edits = append(edits, edit{at: r.Offset(), end: r.Offset(), kind: editLoad})
			}
			if op == opRefFunc {
				note(work{exits: 1})
			} else {
				note(work{calls: 1})
				calls = true
			}
		case opCallIndirect, opReturnCallIndirect:
			edits = append(edits, edit{at: at, end: at, kind: editStore})
			if op == opCallIndirect {
				edits = append(edits, edit{at: r.Offset(), end: r.Offset(), kind: editLoad})
			}
			note(work{calls: 1})
			calls = true
		case opMemoryGrow:
			note(work{exits: 1})
		case opPrefixFC:
			if isTableGrow(ins) {
				note(work{exits: 1})
			}
			if !isBulk(ins[1:]) {
				break
			}
			if n, ok := constLength(code, prev); ok && n <= BulkChunk {
				// A length known here weighs with the code around it,
				// for no count of its own.
				note(work{bulk: 1 + uint64(n)>>BulkShift})
				break
			}
			if h, ok := m.cut(ins); ok {
				edits = append(edits, edit{at: at, end: r.Offset(), kind: editChunk, bulk: h})
			} else {
				edits = append(edits, edit{at: at, end: at, kind: editBulk})
			}
			bulk = true
			counts++
		}
		prev = at
	}
	dense := counts > DenseCounts
	c := counter{globalIndex: m.counter, local: -1}
	extra := 0 // i32 locals added: the bulk length's at locals, then the counter
	if bulk {
		extra++
	}
	if loops > 0 && !dense {
		c.local = int64(locals) + int64(extra)
		extra++
	}
	if extra > 0 {
		// One more group of i32s: it comes after every other local, so
		// none moves.
		out = wasmbin.AppendULEB(out, uint64(groups+1))
		out = append(out, code[afterGroups:start]...)
		out = append(out, byte(extra), 0x7f)
	} else {
		out = append(out, code[:start]...)
	}
	count, countBulk := m.count, m.bulk
	if dense {
		count, countBulk = m.callCount, m.callBulk
	}
	if weight := outside.weight(len(code) - start); calls || weight > 1 {
		out = count(out, c.global(), c, weight)
	} else if c.local >= 0 {
		out = c.set(c.global().get(out))
	}
	at := start
	for _, e := range edits {
		out = append(out, code[at:e.at]...)
		switch e.kind {
		case editCount:
			out = count(out, c, c, e.weight)
		case editBulk:
			out = countBulk(out, c, uint32(locals))
		case editChunk:
			if dense {
				// The helper counts too; a dense function counts in
				// the global.
				out = wasmbin.AppendULEB(append(out, opCall), uint64(m.helper(e.bulk)))
			} else {
				out = m.chunkSite(out, c, uint32(locals), e.bulk, code[e.at:e.end])
			}
		case editFunc:
			out = m.appendFunc(out, e.index)
		case editStore:
			if c.local >= 0 {
				out = c.global().set(c.get(out))
			}
		case editLoad:
			if c.local >= 0 {
				out = c.set(c.global().get(out))
			}
		}
		at = e.end
	}
	return append(out, code[at:]...), edits, nil
}

// constLength returns the constant the instruction at prev pushes, when it
// is an i32.const: then it is the length of the bulk operation after it.
func constLength(code []byte, prev int) (uint32, bool) {
	if prev < 0 || code[prev] != opI32Const {
		return 0, false
	}
	return uint32(wasmbin.NewReader(code[prev+1:]).S32()), true
}

// leaves reports whether the branch instruction b, at a depth of open
// blocks, may branch out of the function.
func leaves(b []byte, open int) bool {
	r := wasmbin.NewReader(b[1:])
	if b[0] == opBrTable {
		for range r.Count() + 1 {
			if r.U32() == uint32(open) {
				return true
			}
		}
		return false
	}
	return r.U32() == uint32(open)
}

// counter is where a function body keeps the counter: the global, or a
// local (local >= 0).
type counter struct {
	globalIndex uint32
	local       int64
}

// global is the global itself, where a function's entry reads the counter.
func (c counter) global() counter { return counter{globalIndex: c.globalIndex, local: -1} }

func (c counter) get(b []byte) []byte {
	if c.local >= 0 {
		return wasmbin.AppendULEB(append(b, opLocalGet), uint64(c.local))
	}
	return wasmbin.AppendULEB(append(b, opGlobalGet), uint64(c.globalIndex))
}

func (c counter) set(b []byte) []byte {
	if c.local >= 0 {
		return wasmbin.AppendULEB(append(b, opLocalSet), uint64(c.local))
	}
	return wasmbin.AppendULEB(append(b, opGlobalSet), uint64(c.globalIndex))
}

// isAccess reports whether the instruction b is a load or a store of
// memory.
func isAccess(b []byte) bool {
	switch op := b[0]; {
	case op >= 0x28 && op <= 0x3e:
		return true
	case op == 0xfd: // SIMD: v128 loads and stores, load_lane, store_lane
		sub := wasmbin.NewReader(b[1:]).U32()
		return sub <= 11 || sub >= 84 && sub <= 93
	}
	return false
}

// isBulk reports whether the 0xfc instruction whose sub-opcode starts b is
// one of the bulk operations whose last operand is a length.
func isBulk(b []byte) bool {
	switch wasmbin.NewReader(b).U32() {
	case 8, 10, 11: // memory.init, memory.copy, memory.fill
		return true
	case 12, 14, 17: // table.init, table.copy, table.fill
		return true
	}
	return false
}

// count appends the instructions that take the counter from from, count
// weight turns down, keep it in to, and tick:
//
//	to := from - weight
//	if to <= 0 {
//		to = Period
//		berm.deadline()
//	}
func (m *rewriter) count(b []byte, from, to counter, weight uint32) []byte {
	b = from.get(b)
	b = wasmbin.AppendSLEB(append(b, opI32Const), int64(weight))
	b = append(b, opI32Sub)
	return m.spent(b, to)
}

// callCount appends a call of the function that counts, with weight. Only
// count-dense functions call it, and they keep the counter in the global.
func (m *rewriter) callCount(b []byte, _, _ counter, weight uint32) []byte {
	b = wasmbin.AppendSLEB(append(b, opI32Const), int64(weight))
	return wasmbin.AppendULEB(append(b, opCall), uint64(m.helper(helper{kind: helperCount})))
}

// bulk appends the instructions that count the weight of the length on the
// stack's top (kept there), 1 + length>>BulkShift, down, and tick when the
// counter is spent.
func (m *rewriter) bulk(b []byte, c counter, local uint32) []byte {
	b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(local))
	return m.countLength(b, c, local)
}

// countLength appends the instructions that count the weight of the length
// in local down, and tick when the counter is spent.
func (m *rewriter) countLength(b []byte, c counter, local uint32) []byte {
	b = c.get(b)
	b = wasmbin.AppendULEB(append(b, opLocalGet), uint64(local))
	b = append(b, opI32Const, BulkShift, opI32ShrU, opI32Sub, opI32Const, 1, opI32Sub)
	return m.spent(b, c)
}

// callBulk appends a call of the function that counts, with the weight of
// the length on the stack's top (kept there).
func (m *rewriter) callBulk(b []byte, _ counter, local uint32) []byte {
	b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(local))
	b = wasmbin.AppendULEB(append(b, opLocalGet), uint64(local))
	b = append(b, opI32Const, BulkShift, opI32ShrU, opI32Const, 1, opI32Add)
	return wasmbin.AppendULEB(append(b, opCall), uint64(m.helper(helper{kind: helperCount})))
}

// spent appends, the counter's new value on the stack: keep it in c, and if
// it is 0 or below, set it to Period and tick. The tick reads no counter, so
// a local need not go back to the global around it.
func (m *rewriter) spent(b []byte, c counter) []byte {
	if c.local >= 0 {
		b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(c.local))
	} else {
		b = c.set(b)
		b = c.get(b)
	}
	b = append(b, opI32Const, 0, opI32LeS, opIf, blockEmpty, opI32Const)
	b = wasmbin.AppendSLEB(b, Period)
	b = c.set(b)
	b = wasmbin.AppendULEB(append(b, opCall), uint64(m.tick))
	return append(b, opEnd)
}
