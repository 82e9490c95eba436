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
const Version = 2

// Period is how many loop headers and function entries pass between two
// ticks. A tick leaves compiled code for Go (by memory.grow 0, the one
// instruction wazero always runs in Go), where the goroutine can be
// preempted: without it a program in a loop would hold its thread past every
// timer and every garbage collection's stop of the world, and so the process.
// At a tick the program reads the stop global. Two ticks are some
// microseconds apart, and one costs about a hundred nanoseconds.
const Period = 1 << 14

// Reserved export names. A module that exports one already gets a suffix,
// so that no program can take the name from the host.
const (
	StopName  = "berm.stop"
	StartName = "berm.start"
)

// ErrUnsupported is a module Deadline does not rewrite: one it cannot read in
// full, which wazero either refuses too or (a gap in the walker) runs as it
// is on the plain path.
var ErrUnsupported = errors.New("transform: module not rewritten")

var errNoMemory = errors.New("no memory to grow by 0")

// Stoppable is a module rewritten by Deadline.
type Stoppable struct {
	Module []byte
	// Stop is the export name of the mutable i32 global that stops the
	// program: set to 1, it traps on unreachable at the next tick.
	Stop string
	// Start is the export name of the module's start function, or "" when
	// it has none. The start section is taken out, since it would run inside
	// instantiation before the host could reach the global: the host calls
	// this export right after instantiating, before anything else.
	Start string
}

// Deadline returns module with the stop global, a counter, and at every
// loop header and function entry a decrement of the counter that ticks when
// it reaches zero. A function that calls none ends by itself, so its entry is
// not counted: that keeps the decrement off the small leaf functions
// compilers call in inner loops. The module must have a memory (for
// memory.grow); berm's all do.
func Deadline(module []byte) (_ Stoppable, err error) {
	defer func() {
		// A bug here must cost a program its speed, not its deploy.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrUnsupported, p)
		}
	}()
	if !bytes.HasPrefix(module, []byte(wasmbin.Header)) {
		return Stoppable{}, fmt.Errorf("%w: not a core module", ErrUnsupported)
	}
	var all []wasmbin.Section
	var sections [wasmbin.SectionTag + 1]*wasmbin.Section
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return Stoppable{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		all = append(all, s)
	}
	for i, s := range all {
		if s.ID == wasmbin.SectionCustom {
			continue
		}
		if s.ID > wasmbin.SectionTag || sections[s.ID] != nil {
			return Stoppable{}, fmt.Errorf("%w: section %d unknown or repeated", ErrUnsupported, s.ID)
		}
		sections[s.ID] = &all[i]
	}

	payload := func(id byte) []byte {
		if s := sections[id]; s != nil {
			return s.Payload
		}
		return nil
	}
	imported, importedMemory, err := importedGlobals(payload(wasmbin.SectionImport))
	if err != nil {
		return Stoppable{}, err
	}
	if !hasMemory(payload(wasmbin.SectionMemory), importedMemory) {
		return Stoppable{}, fmt.Errorf("%w: %w", ErrUnsupported, errNoMemory)
	}
	globals, err := appendGlobals(payload(wasmbin.SectionGlobal))
	if err != nil {
		return Stoppable{}, err
	}
	stopIndex, counterIndex := imported+globals.count-2, imported+globals.count-1

	names, exports, err := readExports(payload(wasmbin.SectionExport))
	if err != nil {
		return Stoppable{}, err
	}
	out := Stoppable{Stop: unique(StopName, names)}
	exports.count++
	exports.entries = wasmbin.AppendName(exports.entries, out.Stop)
	exports.entries = append(exports.entries, 0x03) // global
	exports.entries = wasmbin.AppendULEB(exports.entries, uint64(stopIndex))
	if s := sections[wasmbin.SectionStart]; s != nil {
		r := wasmbin.NewReader(s.Payload)
		start := r.U32()
		if !r.Done() {
			return Stoppable{}, fmt.Errorf("%w: start section", ErrUnsupported)
		}
		out.Start = unique(StartName, names)
		exports.count++
		exports.entries = wasmbin.AppendName(exports.entries, out.Start)
		exports.entries = append(exports.entries, 0x00) // function
		exports.entries = wasmbin.AppendULEB(exports.entries, uint64(start))
	}

	code, err := rewriteCode(payload(wasmbin.SectionCode), stopIndex, counterIndex)
	if err != nil {
		return Stoppable{}, err
	}

	replaced := map[byte][]byte{
		wasmbin.SectionGlobal: globals.encode(),
		wasmbin.SectionExport: exports.encode(),
		wasmbin.SectionStart:  nil,
	}
	if code != nil {
		replaced[wasmbin.SectionCode] = code
	}
	b := make([]byte, 0, len(module)+len(module)/16+64)
	b = append(b, wasmbin.Header...)
	// Sections keep their order; the global and export sections, when the
	// module has none, go where the format orders them.
	added := map[byte]bool{}
	addBefore := func(rank int) {
		for _, id := range []byte{wasmbin.SectionGlobal, wasmbin.SectionExport} {
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
		p, ok := replaced[s.ID]
		switch {
		case s.ID == wasmbin.SectionCustom || !ok:
			b = append(b, module[s.Start:s.End]...)
		case s.ID == wasmbin.SectionStart:
		default:
			b = wasmbin.AppendSection(b, s.ID, p)
		}
	}
	addBefore(order(wasmbin.SectionData) + 1)
	out.Module = b
	return out, nil
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

// appendGlobals returns the global section with two mutable i32 globals at
// its end: stop, initially 0, and the counter.
func appendGlobals(payload []byte) (vector, error) {
	var v vector
	if payload != nil {
		r := wasmbin.NewReader(payload)
		v.count = r.U32()
		if r.Err() != nil {
			return vector{}, fmt.Errorf("%w: global section: %w", ErrUnsupported, r.Err())
		}
		v.entries = append(v.entries, payload[r.Offset():]...)
	}
	v.count += 2
	v.entries = append(v.entries, 0x7f, 0x01, opI32Const, 0x00, opEnd)
	v.entries = append(v.entries, 0x7f, 0x01, opI32Const)
	v.entries = append(wasmbin.AppendSLEB(v.entries, Period), opEnd)
	return v, nil
}

// importedGlobals counts the globals a module imports, which come before
// the ones it defines in the index space, and reports whether it imports a
// memory.
func importedGlobals(payload []byte) (_ uint32, memory bool, _ error) {
	r := wasmbin.NewReader(payload)
	if payload == nil {
		return 0, false, nil
	}
	var n uint32
	for range r.Count() {
		r.Name()
		r.Name()
		switch kind := r.Byte(); kind {
		case 0x00: // function: a type
			r.U32()
		case 0x01: // table: a reference type, limits
			skipValueType(r)
			skipLimits(r)
		case 0x02: // memory
			skipLimits(r)
			memory = true
		case 0x03: // global: a value type, mutability
			skipValueType(r)
			r.Byte()
			n++
		case 0x04: // tag: an attribute, a type
			r.Byte()
			r.U32()
		default:
			return 0, false, fmt.Errorf("%w: import of kind %d", ErrUnsupported, kind)
		}
	}
	if !r.Done() {
		return 0, false, fmt.Errorf("%w: import section", ErrUnsupported)
	}
	return n, memory, nil
}

func hasMemory(payload []byte, imported bool) bool {
	if imported {
		return true
	}
	r := wasmbin.NewReader(payload)
	return r.U32() > 0 && r.Err() == nil
}

func skipLimits(r *wasmbin.Reader) {
	flags := r.Byte()
	r.U64()
	if flags&0x01 != 0 {
		r.U64()
	}
}

// readExports returns the names a module exports and its export section.
func readExports(payload []byte) (map[string]bool, vector, error) {
	names := map[string]bool{}
	var v vector
	if payload == nil {
		return names, v, nil
	}
	r := wasmbin.NewReader(payload)
	v.count = uint32(r.Count())
	at := r.Offset()
	for range v.count {
		names[r.Name()] = true
		r.Byte()
		r.U32()
	}
	if !r.Done() {
		return nil, vector{}, fmt.Errorf("%w: export section", ErrUnsupported)
	}
	v.entries = append(v.entries, payload[at:]...)
	return names, v, nil
}

// unique is name, or name with the first suffix ".1", ".2", ... that the
// module does not export already.
func unique(name string, taken map[string]bool) string {
	n := name
	for i := 1; taken[n]; i++ {
		n = name + "." + strconv.Itoa(i)
	}
	taken[n] = true
	return n
}

// rewriteCode returns the code section's payload with the count at every
// loop header and at the entry of every function that calls another. A nil
// payload (no code section) is nil.
func rewriteCode(payload []byte, stop, counter uint32) ([]byte, error) {
	if payload == nil {
		return nil, nil
	}
	test := count(stop, counter)

	r := wasmbin.NewReader(payload)
	n := r.Count()
	out := make([]byte, 0, len(payload)+len(payload)/8)
	out = wasmbin.AppendULEB(out, uint64(n))
	var loops []int
	var body []byte
	for i := range n {
		code := r.Bytes(r.U32())
		if r.Err() != nil {
			return nil, fmt.Errorf("%w: code section: %w", ErrUnsupported, r.Err())
		}
		var err error
		body, loops, err = rewriteBody(body[:0], code, test, loops[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: function body %d: %w", ErrUnsupported, i, err)
		}
		out = wasmbin.AppendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	if !r.Done() {
		return nil, fmt.Errorf("%w: code section: bytes after the last body", ErrUnsupported)
	}
	return out, nil
}

// count is the instructions that count down and tick:
//
//	counter := counter - 1
//	if counter == 0 {
//		counter = Period
//		memory.grow 0   // into Go, where the goroutine can be preempted
//		if stop { unreachable }
//	}
func count(stop, counter uint32) []byte {
	get := wasmbin.AppendULEB([]byte{opGlobalGet}, uint64(counter))
	set := wasmbin.AppendULEB([]byte{opGlobalSet}, uint64(counter))
	b := append([]byte(nil), get...)
	b = append(b, opI32Const, 1, opI32Sub)
	b = append(b, set...)
	b = append(b, get...)
	b = append(b, opI32Eqz, opIf, blockEmpty, opI32Const)
	b = wasmbin.AppendSLEB(b, Period)
	b = append(b, set...)
	b = append(b, opI32Const, 0, opMemoryGrow, 0, opDrop)
	b = wasmbin.AppendULEB(append(b, opGlobalGet), uint64(stop))
	return append(b, opIf, blockEmpty, opUnreachable, opEnd, opEnd)
}

// rewriteBody appends code with test inserted, to out; loops is scratch.
func rewriteBody(out, code, test []byte, loops []int) ([]byte, []int, error) {
	r := wasmbin.NewReader(code)
	for range r.Count() {
		r.U32()
		skipValueType(r)
	}
	if r.Err() != nil {
		return nil, nil, fmt.Errorf("locals: %w", r.Err())
	}
	locals := r.Offset()
	calls := false
	for r.Len() > 0 {
		op, err := skipInstruction(r)
		if err != nil {
			return nil, nil, err
		}
		switch op {
		case opLoop:
			loops = append(loops, r.Offset())
		case opCall, opCallIndirect, opReturnCall, opReturnCallIndirect:
			calls = true
		}
	}
	out = append(out, code[:locals]...)
	if calls {
		out = append(out, test...)
	}
	at := locals
	for _, l := range loops {
		out = append(out, code[at:l]...)
		out = append(out, test...)
		at = l
	}
	return append(out, code[at:]...), loops, nil
}
