package transform

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// SnapshotVersion names what Snapshot writes; it changes whenever the output
// for some module would.
const SnapshotVersion = 1

// GlobalName prefixes the export names Snapshot gives mutable globals: the
// global's index follows, and a suffix when the module exports the name
// already, so that no program can take the name from the host.
const GlobalName = "berm.global."

// Restorable is a module rewritten by Snapshot: one whose instances can
// start from a memory image and global values the host gives them.
type Restorable struct {
	Module []byte
	// Globals are the module's mutable globals, in index order, each exported
	// under Name: the host reads them from one instance and sets them in
	// another.
	Globals []Global
	// Start reports a start section: it runs inside every instantiation, so
	// no state can be taken from before it.
	Start bool
	// Blocker says why what one instance leaves cannot be carried to another
	// by memory and the mutable globals alone, or is empty: a table written
	// (table.set, grow, fill, copy, init), a segment dropped (elem.drop,
	// data.drop), a mutable global of a reference or vector type.
	Blocker string
}

// Global is a mutable global of a number type.
type Global struct {
	Name string
	Type byte // 0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64
}

// Snapshot returns module with every mutable global exported and every
// active data segment taken out, so that an instance's memory starts as the
// host sets it: zero unless the host maps an image over it. Without a data
// count section no instruction can name a segment, and the active segments
// are removed; with one, each is kept empty at its offset so that indices
// stay. Passive segments are kept as they are. The module must define its
// memory; the caller makes sure that every active segment fits it (wazero
// fails the instantiation of one that does not, and an empty one would
// not), which is why runtime/ builds the image and calls this only then.
func Snapshot(module []byte) (_ Restorable, err error) {
	defer func() {
		// A bug here must cost a program its speed, not its deploy.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrUnsupported, p)
		}
	}()
	if !bytes.HasPrefix(module, []byte(wasmbin.Header)) {
		return Restorable{}, fmt.Errorf("%w: not a core module", ErrUnsupported)
	}
	var all []wasmbin.Section
	var sections [wasmbin.SectionTag + 1]*wasmbin.Section
	for s, err := range wasmbin.Sections(module) {
		if err != nil {
			return Restorable{}, fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		all = append(all, s)
	}
	for i, s := range all {
		if s.ID == wasmbin.SectionCustom {
			continue
		}
		if s.ID > wasmbin.SectionTag || sections[s.ID] != nil {
			return Restorable{}, fmt.Errorf("%w: section %d unknown or repeated", ErrUnsupported, s.ID)
		}
		sections[s.ID] = &all[i]
	}
	payload := func(id byte) []byte {
		if s := sections[id]; s != nil {
			return s.Payload
		}
		return nil
	}

	imp, err := readImports(payload(wasmbin.SectionImport))
	if err != nil {
		return Restorable{}, err
	}
	imported := imp.globals
	if imp.memory || !definesMemory(payload(wasmbin.SectionMemory)) {
		return Restorable{}, fmt.Errorf("%w: the module does not define its memory", ErrUnsupported)
	}
	var out Restorable
	out.Start = sections[wasmbin.SectionStart] != nil
	mutable, blocker, err := mutableGlobals(payload(wasmbin.SectionGlobal), imported)
	if err != nil {
		return Restorable{}, err
	}
	out.Blocker = blocker
	if b, err := codeBlocker(payload(wasmbin.SectionCode)); err != nil {
		return Restorable{}, err
	} else if out.Blocker == "" {
		out.Blocker = b
	}

	names, exports, err := snapshotExports(payload(wasmbin.SectionExport))
	if err != nil {
		return Restorable{}, err
	}
	for _, g := range mutable {
		name := uniqueExport(GlobalName+strconv.FormatUint(uint64(g.index), 10), names)
		exports.count++
		exports.entries = wasmbin.AppendName(exports.entries, name)
		exports.entries = append(exports.entries, 0x03) // global
		exports.entries = wasmbin.AppendULEB(exports.entries, uint64(g.index))
		out.Globals = append(out.Globals, Global{Name: name, Type: g.typ})
	}

	replaced := map[byte][]byte{wasmbin.SectionExport: exports.encode()}
	if s := sections[wasmbin.SectionData]; s != nil {
		data, err := emptyData(s.Payload, sections[wasmbin.SectionDataCount] != nil)
		if err != nil {
			return Restorable{}, err
		}
		replaced[wasmbin.SectionData] = data
	}

	b := make([]byte, 0, len(module)+64*len(mutable))
	b = append(b, wasmbin.Header...)
	added := false
	for _, s := range all {
		if s.ID != wasmbin.SectionCustom && !added && sections[wasmbin.SectionExport] == nil && order(s.ID) > order(wasmbin.SectionExport) {
			b = wasmbin.AppendSection(b, wasmbin.SectionExport, replaced[wasmbin.SectionExport])
			added = true
		}
		if p, ok := replaced[s.ID]; ok && s.ID != wasmbin.SectionCustom {
			b = wasmbin.AppendSection(b, s.ID, p)
			continue
		}
		b = append(b, module[s.Start:s.End]...)
	}
	if !added && sections[wasmbin.SectionExport] == nil {
		b = wasmbin.AppendSection(b, wasmbin.SectionExport, replaced[wasmbin.SectionExport])
	}
	out.Module = b
	return out, nil
}

type mutableGlobal struct {
	index uint32
	typ   byte
}

// mutableGlobals lists the mutable globals the section defines, whose
// indices follow the imported ones, and says why one cannot be carried over
// when one cannot: a reference names something of the instance it came
// from, and wazero reads and writes 64 bits of a global, not a vector's 128.
func mutableGlobals(payload []byte, imported uint32) ([]mutableGlobal, string, error) {
	if payload == nil {
		return nil, "", nil
	}
	r := wasmbin.NewReader(payload)
	var out []mutableGlobal
	blocker := ""
	for i := range r.Count() {
		typ := r.Byte()
		if typ == 0x63 || typ == 0x64 { // (ref null? heaptype)
			r.SkipLEB()
		}
		mut := r.Byte()
		if err := r.SkipConstExpr(); err != nil || r.Err() != nil {
			return nil, "", fmt.Errorf("%w: global section", ErrUnsupported)
		}
		if mut != 0x01 {
			continue
		}
		switch typ {
		case 0x7f, 0x7e, 0x7d, 0x7c:
			out = append(out, mutableGlobal{index: imported + uint32(i), typ: typ})
		default:
			if blocker == "" {
				blocker = fmt.Sprintf("global %d is mutable and of type 0x%02x, not a number", imported+uint32(i), typ)
			}
		}
	}
	if !r.Done() {
		return nil, "", fmt.Errorf("%w: global section", ErrUnsupported)
	}
	return out, blocker, nil
}

// Instructions that change what an instance holds outside memory and
// globals: its tables and the segments it may still apply.
const (
	opTableSet = 0x26
	subDataDrop,
	subTableInit, subElemDrop, subTableCopy, subTableGrow, subTableFill = 9, 12, 13, 14, 15, 17
)

// codeBlocker walks every function body and names the first instruction
// that changes a table or drops a segment, or is empty.
func codeBlocker(payload []byte) (string, error) {
	if payload == nil {
		return "", nil
	}
	r := wasmbin.NewReader(payload)
	n := r.Count()
	for i := range n {
		code := r.Bytes(r.U32())
		if r.Err() != nil {
			return "", fmt.Errorf("%w: code section: %w", ErrUnsupported, r.Err())
		}
		br := wasmbin.NewReader(code)
		for range br.Count() {
			br.U32()
			wasmbin.SkipValueType(br)
		}
		if br.Err() != nil {
			return "", fmt.Errorf("%w: function body %d: locals: %w", ErrUnsupported, i, br.Err())
		}
		for br.Len() > 0 {
			at := br.Offset()
			op, err := wasmbin.SkipInstruction(br)
			if err != nil {
				return "", fmt.Errorf("%w: function body %d: %w", ErrUnsupported, i, err)
			}
			if op == opTableSet {
				return fmt.Sprintf("function body %d writes a table (table.set)", i), nil
			}
			if op != 0xfc {
				continue
			}
			switch sub := wasmbin.NewReader(code[at+1:]).U32(); sub {
			case subDataDrop, subElemDrop:
				return fmt.Sprintf("function body %d drops a segment (0xfc %d)", i, sub), nil
			case subTableInit, subTableCopy, subTableGrow, subTableFill:
				return fmt.Sprintf("function body %d writes a table (0xfc %d)", i, sub), nil
			}
		}
	}
	if !r.Done() {
		return "", fmt.Errorf("%w: code section: bytes after the last body", ErrUnsupported)
	}
	return "", nil
}

// emptyData returns the data section's payload without the active segments'
// bytes: removed, or kept empty when a data count section lets instructions
// name segments by index.
func emptyData(payload []byte, counted bool) ([]byte, error) {
	r := wasmbin.NewReader(payload)
	n := r.Count()
	var kept vector
	for range n {
		start := r.Offset()
		flag := r.U32()
		if flag == 2 {
			r.U32() // memory index
		}
		if flag > 2 {
			return nil, fmt.Errorf("%w: data segment flag %d", ErrUnsupported, flag)
		}
		var exprEnd int
		if flag != 1 {
			if err := r.SkipConstExpr(); err != nil {
				return nil, fmt.Errorf("%w: data segment offset: %w", ErrUnsupported, err)
			}
			exprEnd = r.Offset()
		}
		r.Bytes(r.U32())
		if r.Err() != nil {
			return nil, fmt.Errorf("%w: data section: %w", ErrUnsupported, r.Err())
		}
		switch {
		case flag == 1:
			kept.count++
			kept.entries = append(kept.entries, payload[start:r.Offset()]...)
		case counted:
			kept.count++
			kept.entries = append(kept.entries, payload[start:exprEnd]...)
			kept.entries = append(kept.entries, 0x00) // no bytes
		}
	}
	if !r.Done() {
		return nil, fmt.Errorf("%w: data section: bytes after the last segment", ErrUnsupported)
	}
	return kept.encode(), nil
}

func definesMemory(payload []byte) bool {
	r := wasmbin.NewReader(payload)
	return r.U32() > 0 && r.Err() == nil
}

// snapshotExports returns the names a module exports and its export section.
func snapshotExports(payload []byte) (map[string]bool, vector, error) {
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

// uniqueExport is name, or name with the first suffix ".1", ".2", ... that
// the module does not export already.
func uniqueExport(name string, taken map[string]bool) string {
	n := name
	for i := 1; taken[n]; i++ {
		n = name + "." + strconv.Itoa(i)
	}
	taken[n] = true
	return n
}
