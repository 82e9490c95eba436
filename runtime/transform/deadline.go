package transform

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// Version names what Deadline writes: a cache of its output keys by it, and
// it changes whenever the output for some module would.
const Version = 7

// Period is how many turns pass between two ticks. A tick calls the host,
// which checks the call's deadline and yields the goroutine: two ticks are
// some microseconds apart, and one costs a few hundred nanoseconds.
//
// Each place that counts weighs the work it stands for, so that no work goes
// uncounted however it is shaped: a loop header 1 turn plus one per
// 1<<CodeShift bytes of the loop's body (straight-line code runs once per
// turn of its loop), one per call in it and one per 1<<AccessShift loads and
// stores in it; a function's entry likewise for its body outside loops; a
// bulk operation 1 plus one per 1<<BulkShift bytes or entries.
const Period = 1 << 14

// BulkShift weighs bulk operations (memory.fill, memory.copy, memory.init and
// the table's): one turn, and one more per 1<<BulkShift bytes or entries, so
// that a loop of fills ticks as often as its work asks, however short each.
const BulkShift = 12

// CodeShift weighs code: one turn per 1<<CodeShift bytes of a loop's or a
// function's body, a hundred instructions or so, which run in less time
// than a fill of 1<<BulkShift bytes. A function whose body is shorter, and
// that calls none, ends within that and is not counted at its entry: that
// keeps the count off the small leaf functions compilers call in inner
// loops; a call of one is a turn of its caller's count instead.
const CodeShift = 10

// AccessShift weighs loads and stores: one turn per 1<<AccessShift of them
// in a loop's or a function's body. An access that misses every cache and
// the TLB costs hundreds of nanoseconds, so that a loop of 1 KiB of loads
// chasing pointers through a large memory, one turn by its bytes, would
// otherwise tick a second apart.
const AccessShift = 5

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
// function that calls another or whose body is 1<<CodeShift bytes or more,
// and at every bulk operation, and a call of the import berm.deadline
// whenever it runs out. A function with loops keeps the counter in a local
// between its calls. The counter is exported as CounterExport.
//
// The import comes after the module's own, so every function the module
// defines moves up by one index: every place that names one is rewritten.
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

	types, params, tickType, weightType, err := readTypes(payload(wasmbin.SectionType))
	if err != nil {
		return nil, err
	}
	imp, err := readImports(payload(wasmbin.SectionImport))
	if err != nil {
		return nil, err
	}
	imports, funcs, globals := imp.section, imp.funcs, imp.globals
	// The tick is the last function import; the functions the module
	// defines come after it.
	tick := funcs
	imports.count++
	imports.entries = wasmbin.AppendName(imports.entries, TickModule)
	imports.entries = wasmbin.AppendName(imports.entries, TickName)
	imports.entries = append(imports.entries, 0x00)
	imports.entries = wasmbin.AppendULEB(imports.entries, uint64(tickType))
	funcTypes, err := readFunctions(payload(wasmbin.SectionFunction))
	if err != nil {
		return nil, err
	}
	// The function that counts for loop-dense functions comes after every
	// other, so that no index moves for it.
	m := &rewriter{tick: tick, countFunc: tick + 1 + uint32(len(funcTypes))}
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
			if i >= len(funcTypes) || int(funcTypes[i]) >= len(params) {
				return 0, fmt.Errorf("function %d: no type", i)
			}
			return params[funcTypes[i]], nil
		}
		if replaced[wasmbin.SectionCode], err = m.code(p, paramsOf); err != nil {
			return nil, err
		}
	}
	if m.countUsed {
		if weightType < 0 {
			// Appended, so that no type index moves.
			weightType = int64(types.count)
			types.count++
			types.entries = append(types.entries[:len(types.entries):len(types.entries)], 0x60, 1, 0x7f, 0)
		}
		functions := vector{count: uint32(len(funcTypes)) + 1}
		for _, t := range funcTypes {
			functions.entries = wasmbin.AppendULEB(functions.entries, uint64(t))
		}
		functions.entries = wasmbin.AppendULEB(functions.entries, uint64(weightType))
		replaced[wasmbin.SectionFunction] = functions.encode()
	}
	replaced[wasmbin.SectionType] = types.encode()

	b := make([]byte, 0, len(module)+len(module)/8+64)
	b = append(b, wasmbin.Header...)
	// Sections keep their order; the type, import and global sections,
	// when the module has none, go where the format orders them.
	added := map[byte]bool{}
	addBefore := func(rank int) {
		for _, id := range []byte{wasmbin.SectionType, wasmbin.SectionImport, wasmbin.SectionGlobal, wasmbin.SectionExport} {
			if sections[id] == nil && !added[id] && order(id) < rank {
				b = wasmbin.AppendSection(b, id, replaced[id])
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

// readTypes returns the type section, with a type of no parameters and no
// results appended when it has none (appended, so that no type index
// moves); the number of parameters of each type; the index of that type;
// and the index of a type of one i32 parameter and no results, the count
// function's, or -1 when there is none.
func readTypes(payload []byte) (_ vector, params []uint32, tick uint32, weight int64, _ error) {
	r := wasmbin.NewReader(payload)
	var v vector
	found := false
	weight = -1
	if payload != nil {
		v.count = uint32(r.Count())
		v.entries = payload[r.Offset():]
		for i := range v.count {
			if form := r.Byte(); form != 0x60 {
				return vector{}, nil, 0, 0, fmt.Errorf("type %d: form 0x%02x", i, form)
			}
			n := uint32(r.Count())
			i32 := false
			for range n {
				at := r.Offset()
				skipValueType(r)
				i32 = r.Offset() == at+1 && payload[at] == 0x7f
			}
			results := r.Count()
			for range results {
				skipValueType(r)
			}
			if n == 0 && results == 0 && !found {
				tick, found = i, true
			}
			if n == 1 && i32 && results == 0 && weight < 0 {
				weight = int64(i)
			}
			params = append(params, n)
		}
		if !r.Done() {
			return vector{}, nil, 0, 0, errors.New("type section")
		}
	}
	if !found {
		tick = v.count
		v.count++
		v.entries = append(v.entries[:len(v.entries):len(v.entries)], 0x60, 0, 0)
		params = append(params, 0)
	}
	return v, params, tick, weight, nil
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
			skipValueType(r)
			skipLimits(r)
		case 0x02: // memory
			skipLimits(r)
			imp.memory = true
		case 0x03: // global: a value type, mutability
			skipValueType(r)
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
	// countFunc is the index of a function that counts a weight, its
	// parameter, which count-dense functions call rather than count inline;
	// countUsed is set once one does, and the function is then added.
	countFunc uint32
	countUsed bool
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
		op, err := skipInstruction(r)
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
			skipValueType(r)
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
				skipValueType(r)
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
	for r.Len() > 0 {
		id := r.Byte()
		sub := r.Bytes(r.U32())
		if r.Err() != nil {
			return b
		}
		switch id {
		case 1: // function names: an index, a name
			sub = m.nameMap(sub, false)
		case 2: // local names: a function index, a map of local names
			sub = m.nameMap(sub, true)
		case 3: // label names
			continue
		}
		if sub == nil {
			return b
		}
		out = append(out, id)
		out = wasmbin.AppendULEB(out, uint64(len(sub)))
		out = append(out, sub...)
	}
	return wasmbin.AppendSection(b, wasmbin.SectionCustom, out)
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
// function indices moved.
func (m *rewriter) code(payload []byte, params func(int) (uint32, error)) ([]byte, error) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	out := make([]byte, 0, len(payload)+len(payload)/4)
	out = wasmbin.AppendULEB(out, uint64(n))
	var body []byte
	var edits []edit
	if m.countFunc-m.tick-1 != uint32(n) {
		return nil, fmt.Errorf("code section: %d bodies for %d functions", n, m.countFunc-m.tick-1)
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
	if m.countUsed {
		// (param $weight i32): counter -= weight, and tick when it is spent.
		body = append(body[:0], 0) // no locals but the parameter
		global := counter{globalIndex: m.counter, local: -1}
		body = global.get(body)
		body = append(body, opLocalGet, 0, opI32Sub)
		body = m.spent(body, global)
		body = append(body, opEnd)
		out = wasmbin.AppendULEB(out, uint64(len(body)))
		out = append(out, body...)
		out = append(wasmbin.AppendULEB(make([]byte, 0, len(out)+5), uint64(n+1)), out[wasmbin.ULEBLen(uint64(n)):]...)
	}
	return out, nil
}

// edit is a place in a function body where the rewrite writes.
type edit struct {
	at, end int  // the bytes replaced: empty for an insertion
	kind    byte // editCount with weight, editBulk, or editFunc with index
	index   uint32
	weight  uint32
	work    work // of a loop's count: what its body holds outside inner loops
}

// work is what a loop's body, or a function's outside its loops, holds that
// its bytes do not weigh.
type work struct {
	calls, accesses int
}

// weight is what n bytes of code holding w weigh.
func (w work) weight(n int) uint32 {
	return codeWeight(n) + uint32(w.calls) + uint32(w.accesses>>AccessShift)
}

const (
	editCount = iota // count weight turns (inserted)
	editBulk         // count the length on the stack's top (inserted)
	editFunc         // a function index (replaced)
	editStore        // give the global the counter a local holds (inserted)
	editLoad         // take the counter from the global into the local (inserted)
)

// codeWeight is what n bytes of code weigh: a turn, and one per
// 1<<CodeShift bytes.
func codeWeight(n int) uint32 { return 1 + uint32(n>>CodeShift) }

// body appends code, rewritten, to out; edits is scratch.
//
// A function with loops counts in a local of its own, which the compiler
// keeps in a register, rather than in the global, which is two loads and a
// store at every turn: the local takes the global's value at the entry and
// after every call, and gives it back before every call and every way out.
// A function with bulk operations gets one more local, an i32 that holds
// their length.
func (m *rewriter) body(out, code []byte, params uint32, edits []edit) ([]byte, []edit, error) {
	r := wasmbin.NewReader(code)
	groups := r.Count()
	afterGroups := r.Offset()
	locals := uint64(params)
	for range groups {
		locals += uint64(r.U32())
		skipValueType(r)
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
	for r.Len() > 0 {
		at := r.Offset()
		op, err := skipInstruction(r)
		if err != nil {
			return nil, nil, err
		}
		if isAccess(code[at:r.Offset()]) {
			inner().accesses++
		}
		switch op {
		case opBlock, opIf:
			open = append(open, -1)
		case opLoop:
			open = append(open, len(edits))
			edits = append(edits, edit{at: r.Offset(), end: r.Offset(), kind: editCount, weight: 1})
			counts++
			loops++
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
			if leaves(code[at:r.Offset()], len(open)) {
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
			if op != opRefFunc {
				inner().calls++
				calls = true
			}
		case opCallIndirect, opReturnCallIndirect:
			edits = append(edits, edit{at: at, end: at, kind: editStore})
			if op == opCallIndirect {
				edits = append(edits, edit{at: r.Offset(), end: r.Offset(), kind: editLoad})
			}
			inner().calls++
			calls = true
		case opPrefixFC:
			if isBulk(code[at+1:]) {
				edits = append(edits, edit{at: at, end: at, kind: editBulk})
				bulk = true
				counts++
			}
		}
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
	m.countUsed = true
	b = wasmbin.AppendSLEB(append(b, opI32Const), int64(weight))
	return wasmbin.AppendULEB(append(b, opCall), uint64(m.countFunc))
}

// bulk appends the instructions that count the weight of the length on the
// stack's top (kept there), 1 + length>>BulkShift, down, and tick when the
// counter is spent.
func (m *rewriter) bulk(b []byte, c counter, local uint32) []byte {
	b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(local))
	b = c.get(b)
	b = wasmbin.AppendULEB(append(b, opLocalGet), uint64(local))
	b = append(b, opI32Const, BulkShift, opI32ShrU, opI32Sub, opI32Const, 1, opI32Sub)
	return m.spent(b, c)
}

// callBulk appends a call of the function that counts, with the weight of
// the length on the stack's top (kept there).
func (m *rewriter) callBulk(b []byte, _ counter, local uint32) []byte {
	m.countUsed = true
	b = wasmbin.AppendULEB(append(b, opLocalTee), uint64(local))
	b = wasmbin.AppendULEB(append(b, opLocalGet), uint64(local))
	b = append(b, opI32Const, BulkShift, opI32ShrU, opI32Const, 1, opI32Add)
	return wasmbin.AppendULEB(append(b, opCall), uint64(m.countFunc))
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
